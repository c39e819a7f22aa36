"""A run's summary, aggregated from its calls. When anything is missing, the FIRST
sentence says so: the model must not present partial data as the whole answer."""

from __future__ import annotations

from collections.abc import Sequence

from toolops.models import ToolCall

S = ToolCall.Status

_WHAT: dict[str, str] = {
    S.FAILED: "failed",
    S.SKIPPED: "was skipped",
    S.DEGRADED: "returned partial data",
    S.REJECTED: "was rejected",
    S.UNKNOWN: "has an unknown outcome",
    S.PENDING_APPROVAL: "is waiting for approval",
    S.IN_PROGRESS: "is still running",
}
_REASON: dict[str, str] = {
    "timeout": "timed out",
    "circuit_open": "was unavailable",
    "budget_exhausted": "hit the run budget",
    "dependency_failed": "was skipped because a dependency failed",
    "invalid_args": "got invalid args",
    "unknown_tool": "does not exist",
    "result_invalid": "returned an invalid result",
    "rejected": "was rejected",
    "expired": "was not approved in time",
}
PARTIAL = (S.FAILED, S.SKIPPED, S.DEGRADED, S.REJECTED, S.UNKNOWN)
WAITING = (S.PENDING_APPROVAL, S.IN_PROGRESS)


def run_summary(calls: Sequence[ToolCall]) -> str:
    problems = [c for c in calls if c.status in PARTIAL]
    return summary_text(
        total=len(calls),
        ok=sum(1 for c in calls if c.status == S.SUCCEEDED),
        problems=problems[:5],
        problems_total=len(problems),
        waiting=[c for c in calls if c.status in WAITING][:5],
    )


def summary_text(
    *,
    total: int,
    ok: int,
    problems: Sequence[ToolCall],
    problems_total: int,
    waiting: Sequence[ToolCall],
) -> str:
    """The summary from counts and the first few calls that need saying (at most five of
    each kind): a run too long to load whole is summed up by the database."""
    if not total:
        return "No tool calls yet."
    plural = "s" if total != 1 else ""
    if problems_total:
        details = "; ".join(_describe(c) for c in problems[:5])
        more = f"; and {problems_total - 5} more" if problems_total > 5 else ""
        head = (
            f"Based on partial data: {ok} of {total} tool call{plural} succeeded; {details}{more}."
        )
    else:
        head = (
            f"All {ok} of {total} tool call{plural} succeeded."
            if not waiting
            else (f"{ok} of {total} tool call{plural} succeeded so far.")
        )
    if waiting:
        head += " Waiting: " + ", ".join(_describe(c) for c in waiting[:5]) + "."
    return head


def _describe(call: ToolCall) -> str:
    # The reason explains an ending; an unknown or degraded call is not simply "timed out".
    ended = call.status in (S.FAILED, S.REJECTED, S.SKIPPED)
    what = _REASON.get(call.error_reason) if ended else None
    return f"{call.tool} ({call.tool_call_id}) {what or _WHAT.get(call.status, call.status)}"


def last_succeeded(calls: Sequence[ToolCall]) -> str | None:
    done = [c for c in calls if c.status == S.SUCCEEDED]
    if not done:
        return None
    # Where the run stopped: the furthest step that succeeded, not the last one settled.
    return max(done, key=lambda c: (c.step_index, c.created_at, c.pk)).tool_call_id


# A run's undo calls (compensations) by status, as the summary of an aborted run says them.
UNDONE, UNDO_FAILED, FIXED_BY_HAND = "succeeded", "dead_lettered", "resolved"
UNDOING = ("registered", "pending", "running")
ABORT_STATES = ("aborting", "aborted", "compensation_failed")


def abort_text(*, status: str, calls: Sequence[ToolCall], undo: Sequence[tuple[str, str]]) -> str:
    """The first sentence of an aborted run's summary: that it was aborted, and what was
    undone, is being undone or failed to undo. `undo`: the run's compensations as (undo
    tool, status), newest first. Never "All 3 of 3 tool calls succeeded" for a run whose
    work was taken back."""
    ok = sum(1 for c in calls if c.status == S.SUCCEEDED)
    plural = "s" if len(calls) != 1 else ""
    verb = "Aborting" if status == "aborting" else "Aborted"
    head = f"{verb} after {ok} of {len(calls)} tool call{plural} succeeded"
    if not calls:
        head = f"{verb} before any tool call"
    done = [tool for tool, state in undo if state == UNDONE]
    failed = [tool for tool, state in undo if state == UNDO_FAILED]
    by_hand = [tool for tool, state in undo if state == FIXED_BY_HAND]
    going = [tool for tool, state in undo if state in UNDOING]
    parts = []
    if failed:
        parts.append(f"failed to undo: {_names(failed)} (a support ticket is open)")
    if going:
        parts.append(f"still undoing: {_names(going)}")
    if by_hand:
        parts.append(f"fixed by hand: {_names(by_hand)}")
    if done:
        parts.append(f"undone: {_names(done)}")
    if not parts:
        parts.append("nothing needed undoing")
    return f"{head}; {'; '.join(parts)}."


def _names(tools: Sequence[str]) -> str:
    """ "refund ×2, release_stock": each undo tool once, with its count."""
    counts: dict[str, int] = {}
    for tool in tools:
        counts[tool] = counts.get(tool, 0) + 1
    return ", ".join(f"{t} ×{n}" if n > 1 else t for t, n in counts.items())
