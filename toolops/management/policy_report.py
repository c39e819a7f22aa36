"""What `manage.py policy show`, `history` and `simulate` print: plain text for a terminal,
times in UTC (a shell's reader may be anywhere; the console shows local times)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime

from toolops.policy.models import PolicyVersion
from toolops.policy.simulate import Finding, Simulation

NO_POLICY = "No policy: every agent may call every public tool; approvals follow the catalog."


def when(moment: datetime | None) -> str:
    if moment is None:
        return "-"
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def show(version: PolicyVersion | None) -> str:
    """The version in force: number, author, when, note; then its text."""
    if version is None:
        return NO_POLICY
    head = (
        f"Policy v{version.number}, in force since {when(version.applied_at)}, "
        f"by {version.author or 'unknown'}"
    )
    restores = f" (restores v{version.restores})" if version.restores is not None else ""
    return f"{head}\nNote: {version.note}{restores}\n\n{version.text.strip()}"


def history(versions: Iterable[PolicyVersion]) -> str:
    """One line per version, newest first; the one in force is marked with *."""
    rows = list(versions)
    if not rows:
        return NO_POLICY
    applied = [v.number for v in rows if v.state == PolicyVersion.State.APPLIED]
    in_force = max(applied) if applied else None
    lines = []
    for v in rows:
        mark = "*" if v.number == in_force else " "
        restores = f" (restores v{v.restores})" if v.restores is not None else ""
        moment = when(v.applied_at or v.created_at)
        author = v.author or "unknown"
        lines.append(f"{mark} v{v.number:<4} {v.state:<9} {moment}  {author}  {v.note}{restores}")
    lines.append("(* in force)" if in_force is not None else "(none in force)")
    return "\n".join(lines)


def simulation(result: Simulation, *, name: str) -> str:
    """Each finding with its count and up to five examples, then the totals."""
    lines = [f"Simulated {name} on the calls of the last {result.days} days."]
    for finding in result.findings:
        lines.extend(_finding(finding))
    if not result.findings:
        lines.append("No grant, rule or limit of it would have changed any of these calls.")
    lines.append(
        f"Totals: {result.examined} call{_s(result.examined)} examined; "
        f"{len(result.findings)} finding{_s(len(result.findings))} covering "
        f"{result.changed} call{_s(result.changed)}."
    )
    if result.truncated:
        lines.append(f"Only the newest {result.examined:,} calls of the period were examined.")
    return "\n".join(lines)


def _finding(finding: Finding) -> list[str]:
    label = "no grant" if finding.kind == "grant" else f"{finding.kind} {finding.name!r}"
    lines = [f"{label}: {finding.outcome}, {finding.count} call{_s(finding.count)}"]
    for example in finding.examples:
        lines.append(
            f"    {example.call_id}  {example.tool}  {example.agent}  {when(example.created_at)}"
        )
    return lines


def _s(count: int) -> str:
    return "" if count == 1 else "s"
