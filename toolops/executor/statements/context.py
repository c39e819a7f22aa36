"""The first round trip of a call: the agent's run and all the call needs of it, in ONE
SELECT (DESIGN.md "The path of one call", auth + quota → … → session duplicate check) —
read back as a `ContextRow`:

- the run itself, and the number of the agent policy version in force;
- the run's call that already has the request's tool_call_id, if any;
- the tool's circuit breaker;
- for a write with a session-duplicate window: an earlier call of another run of the
  session with the same args (the approval gate holds such a repeat for a person);
- for a write: its key's claim and call, when the key was claimed before — so that a
  replay is answered by this one query.

Hand-written SQL: compiling this query with the ORM costs more than running it. The
select list is built part by part (`_Select`), and the row is read back by part name."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.db import connection

from toolops.executor import claims
from toolops.executor.breaker import BreakerRow
from toolops.executor.claims import ClaimState
from toolops.models import Run, ToolCall
from toolops.policy.active import VERSION_SQL
from toolops.rows import RowLoader

_runs = RowLoader(Run)
_calls = RowLoader(ToolCall)
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


@dataclass(frozen=True)
class DuplicateProbe:
    """What the session-duplicate check looks for: the tool, the args' digest, and how far
    back (the tool's window, in seconds)."""

    tool: str
    args_digest: str
    window_s: int


@dataclass(frozen=True)
class ContextRow:
    run: Run
    policy_version: int | None
    existing_call_pk: int | None
    breaker: BreakerRow
    session_duplicate_pk: int | None
    claim_hit: tuple[ClaimState, ToolCall] | None


def read(
    *,
    agent_id: int,
    run_id: str,
    tool: str,
    tool_call_id: str | None,
    duplicate: DuplicateProbe | None,
    key: str | None,
) -> ContextRow | None:
    """The agent's run `run_id` with what a call of `tool` needs of it; None: the agent
    has no such run. `key`: a write's idempotency key (None for a read)."""
    select = _Select()
    select.add("run", _runs.columns("r"), width=len(_runs.fields))
    select.add("policy_version", VERSION_SQL)
    if tool_call_id is not None:
        select.add(
            "existing",
            "(SELECT c.id FROM toolops_toolcall c WHERE c.run_id = r.id AND c.tool_call_id = %s)",
            params=[tool_call_id],
        )
    select.add("breaker", BreakerRow.columns("b"), width=BreakerRow.WIDTH)
    joins = "LEFT JOIN toolops_circuitbreaker b ON b.tool = %s "
    join_params: list[Any] = [tool]
    if duplicate is not None:
        since, param = claims.now_minus_sql()
        select.add(
            "duplicate",
            _DUPLICATE_SQL.format(since=since),
            params=[duplicate.tool, duplicate.args_digest, param(duplicate.window_s)],
        )
    if key is not None:
        select.add("claim", claims.with_call_sql("k", "kc"), width=4 + len(_calls.fields))
        joins += (
            'LEFT JOIN toolops_idempotencyrecord k ON k."key" = %s '
            "LEFT JOIN toolops_toolcall kc ON kc.call_id = k.call_ref "
        )
        join_params.append(key)
    sql = f"SELECT {select.sql()} FROM toolops_run r {joins}WHERE r.agent_id = %s AND r.run_id = %s"
    with connection.cursor() as cursor:
        cursor.execute(sql, [*select.params, *join_params, agent_id, run_id])
        found = cursor.fetchone()
    if found is None:
        return None
    part = select.parts(found)
    return ContextRow(
        run=_runs.load(part["run"]),
        policy_version=part["policy_version"][0],
        existing_call_pk=part["existing"][0] if "existing" in part else None,
        breaker=BreakerRow.load(part["breaker"]),
        session_duplicate_pk=part["duplicate"][0] if "duplicate" in part else None,
        claim_hit=claims.with_call_from_row(part["claim"]) if "claim" in part else None,
    )


class _Select:
    """A select list built part by part, and read back by part name."""

    def __init__(self) -> None:
        self.columns: list[str] = []
        self.params: list[Any] = []
        self.slices: dict[str, slice] = {}
        self.width = 0

    def add(self, name: str, sql: str, *, width: int = 1, params: Sequence[Any] = ()) -> None:
        self.columns.append(sql)
        self.params += params
        self.slices[name] = slice(self.width, self.width + width)
        self.width += width

    def sql(self) -> str:
        return ", ".join(self.columns)

    def parts(self, row: Sequence[Any]) -> dict[str, Sequence[Any]]:
        return {name: row[where] for name, where in self.slices.items()}


# The earliest call with this tool and canonical args in ANOTHER run of the same agent
# and session_key, within the window, that took or may have taken effect. CASE first: a
# run without a session_key (most) never runs the subquery at all.
_DUPLICATE_SQL = (
    "CASE WHEN r.session_key IS NULL THEN NULL ELSE "
    "(SELECT d.id FROM toolops_toolcall d JOIN toolops_run dr ON dr.id = d.run_id "
    "WHERE dr.session_key = r.session_key AND dr.agent_id = r.agent_id AND dr.id <> r.id "
    "AND d.role = 'call' AND d.tool = %s AND d.args_digest = %s "
    "AND d.created_at >= {since} AND d.status IN ("
    + ", ".join(f"'{s}'" for s in DUPLICATE_STATUSES)
    + ") ORDER BY d.created_at, d.id LIMIT 1) END"
)
