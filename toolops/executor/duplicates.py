"""The session duplicate check (DESIGN.md): a write with the same tool and canonical args
as a call in ANOTHER run of the same agent and session_key, within the tool's window,
that took or may have taken effect, is held for a person (gate.py) as a possible
duplicate. Read along with the run, in its one query (context.py)."""

from __future__ import annotations

from toolops.models import ToolCall

from .claims import now_minus_sql
from .prepare import Prepared

Status = ToolCall.Status
# Statuses of an earlier call that make a repeat suspicious: it took, or may have taken,
# effect (a failed, rejected or skipped call did not).
DUPLICATE_STATUSES = (
    Status.SUCCEEDED,
    Status.DEGRADED,
    Status.UNKNOWN,
    Status.PENDING_APPROVAL,
    Status.IN_PROGRESS,
)


def duplicate_probe(prepared: Prepared) -> tuple[str, str, int] | None:
    """What the session-duplicate check reads along with the run (a valid write of a tool
    with a window): tool, args digest, window in seconds."""
    spec = prepared.spec
    if spec is None or spec.is_read or prepared.problem or not spec.session_dedupe_window_s:
        return None
    return spec.name, prepared.digest, spec.session_dedupe_window_s


def duplicate_sql(run_alias: str) -> str:
    """A subquery for the run read: the earliest call with this tool and canonical args in
    ANOTHER run of the same agent and session_key, within the window, that took or may
    have taken effect. Parameters: `duplicate_params`."""
    since, _ = now_minus_sql()
    statuses = ", ".join(f"'{s}'" for s in DUPLICATE_STATUSES)
    # CASE first: a run without a session_key (most) never runs the subquery at all.
    return (
        f"CASE WHEN {run_alias}.session_key IS NULL THEN NULL ELSE "
        "(SELECT d.id FROM toolops_toolcall d JOIN toolops_run dr ON dr.id = d.run_id "
        f"WHERE dr.session_key = {run_alias}.session_key "
        f"AND dr.agent_id = {run_alias}.agent_id AND dr.id <> {run_alias}.id "
        "AND d.role = 'call' AND d.tool = %s AND d.args_digest = %s "
        f"AND d.created_at >= {since} AND d.status IN ({statuses}) "
        "ORDER BY d.created_at, d.id LIMIT 1) END"
    )


def duplicate_params(tool: str, args_digest: str, window_s: int) -> list[object]:
    _, param = now_minus_sql()
    return [tool, args_digest, param(window_s)]  # type: ignore[operator]
