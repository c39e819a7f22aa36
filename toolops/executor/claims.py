"""The idempotency claim, in SQL: INSERT … ON CONFLICT DO NOTHING decides the one winner,
and every lease is timed by the database's clock, never a process clock (processes'
clocks drift; the database's is the one they all share)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import connection

from toolops.models import ToolCall
from toolops.rows import RowLoader
from toolops.tools.spec import ToolSpec

TABLE = "toolops_idempotencyrecord"
_calls = RowLoader(ToolCall)


def lease_s(spec: ToolSpec) -> float:
    """How long a claim's holder may go silent: the lease must outlive one attempt; each
    further attempt renews it."""
    return max(settings.TOOLOPS_CLAIM_LEASE_S, spec.timeout_s + 1.0)


def ttl_s() -> float:
    """How long an idempotency record answers replays."""
    return settings.TOOLOPS_IDEMPOTENCY_TTL_S


def now_sql() -> str:
    """The database's clock, as SQL to put in a hand-written statement."""
    if connection.vendor == "postgresql":
        return "statement_timestamp()"
    return "strftime('%%Y-%%m-%%d %%H:%%M:%%f', 'now')"


def now_plus_sql() -> tuple[str, Callable[[float], float | str]]:
    """SQL for now + N seconds, and a function turning N into its parameter."""
    if connection.vendor == "postgresql":
        return "statement_timestamp() + %s * interval '1 second'", float
    return "strftime('%%Y-%%m-%%d %%H:%%M:%%f', 'now', %s)", lambda s: f"+{float(s):.3f} seconds"


def claim_sql(
    *, key: str, call_ref: str, tool: str, lease_s: float, ttl_s: float, only_if: str = ""
) -> tuple[str, list[Any]]:
    """The claim: an INSERT that does nothing when the key is taken, RETURNING 1 if won.
    `only_if`: an SQL condition (on earlier CTEs) without which nothing is claimed."""
    plus, param = now_plus_sql()
    rows = (
        f"SELECT %s, %s, %s, 'claimed', 1, {plus}, {now_sql()}, {plus} WHERE {only_if}"
        if only_if
        else f"VALUES (%s, %s, %s, 'claimed', 1, {plus}, {now_sql()}, {plus})"
    )
    sql = (
        f'INSERT INTO {TABLE} ("key", call_ref, tool, state, fence, lease_until, created_at, '
        f'expires_at) {rows} ON CONFLICT ("key") DO NOTHING RETURNING 1'
    )
    return sql, [key, call_ref, tool, param(lease_s), param(ttl_s)]


def now_minus_sql() -> tuple[str, Callable[[float], float | str]]:
    """SQL for now − N seconds, and a function turning N into its parameter."""
    if connection.vendor == "postgresql":
        return "statement_timestamp() - %s * interval '1 second'", float
    return "strftime('%%Y-%%m-%%d %%H:%%M:%%f', 'now', %s)", lambda s: f"-{float(s):.3f} seconds"


@dataclass(frozen=True)
class ClaimState:
    state: str
    fence: int
    call_ref: str
    lease_expired: bool


def state_sql(alias: str) -> str:
    """The claim columns ClaimState needs, for a query that reads them with others."""
    return f"{alias}.state, {alias}.fence, {alias}.call_ref, {alias}.lease_until < {now_sql()}"


def state_from_row(row: Sequence[Any]) -> ClaimState | None:
    state, fence, call_ref, expired = row
    if state is None:
        return None
    return ClaimState(
        state=str(state), fence=int(fence), call_ref=str(call_ref), lease_expired=bool(expired)
    )


def with_call_sql(claim: str, call: str) -> str:
    """The columns of a claim and of its call, for `with_call_from_row`."""
    return f"{state_sql(claim)}, {_calls.columns(call)}"


def with_call_from_row(row: Sequence[object]) -> tuple[ClaimState, ToolCall] | None:
    """A claim and its call from `with_call_sql` columns; None when there is no claim."""
    state = state_from_row(row[:4])
    return None if state is None else (state, _calls.load(row[4:]))


def peek_with_call(*, key: str) -> tuple[ClaimState, ToolCall] | None:
    """The claim and its call in one query: a replay's whole answer, usually."""
    sql = (
        f"SELECT {with_call_sql('r', 'c')} FROM {TABLE} r "
        'JOIN toolops_toolcall c ON c.call_id = r.call_ref WHERE r."key" = %s'
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [key])
        row = cursor.fetchone()
    return None if row is None else with_call_from_row(row)


def take_over(*, key: str, seen_fence: int, lease_s: float) -> int | None:
    """Take a claim whose holder's lease ran out; the new fence, or None if another
    request took it first or the holder recorded after all."""
    plus, param = now_plus_sql()
    sql = (
        f"UPDATE {TABLE} SET fence = fence + 1, lease_until = {plus} "
        f"WHERE \"key\" = %s AND state = 'claimed' AND fence = %s AND lease_until < {now_sql()} "
        "RETURNING fence"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [param(lease_s), key, seen_fence])
        row = cursor.fetchone()
    return None if row is None else int(row[0])


# "Not yet recorded" (a claim has two states), written so that it does not imply the
# sweep's partial index (`state = 'claimed'`): a hot statement that names one key must use
# the unique key index. The planner preferred the partial index when its statistics saw
# few open claims, and would then scan every open claim once many were held for
# approval (measured on 10 million records: bench/flat.py).
STILL_CLAIMED = "state <> 'recorded'"


def renew(*, key: str, fence: int, lease_s: float) -> bool:
    """Extend our lease before another attempt; False means we lost the claim."""
    plus, param = now_plus_sql()
    sql = (
        f"UPDATE {TABLE} SET lease_until = {plus} "
        f'WHERE "key" = %s AND {STILL_CLAIMED} AND fence = %s'
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [param(lease_s), key, fence])
        return cursor.rowcount == 1


def record_sql(*, key: str, fence: int) -> tuple[str, list[Any]]:
    """Mark the claim recorded — only while we still hold it (the fencing token)."""
    sql = (
        f"UPDATE {TABLE} SET state = 'recorded', recorded_at = {now_sql()} "
        f'WHERE "key" = %s AND {STILL_CLAIMED} AND fence = %s RETURNING 1'
    )
    return sql, [key, fence]


def record(*, key: str, fence: int) -> bool:
    sql, params = record_sql(key=key, fence=fence)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchone() is not None


def reclaim(*, key: str, lease_s: float) -> int | None:
    """Take up a claim held for a person's decision, once it is approved: a new fence and
    an ordinary lease for the worker that executes it. Only the hold's own claim (fence 1):
    None when it is no longer open, or a sweep took it over meanwhile."""
    plus, param = now_plus_sql()
    sql = (
        f"UPDATE {TABLE} SET fence = fence + 1, lease_until = {plus} "
        "WHERE \"key\" = %s AND state = 'claimed' AND fence = 1 RETURNING fence"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [param(lease_s), key])
        row = cursor.fetchone()
    return None if row is None else int(row[0])


def close(*, key: str) -> bool:
    """Record a claim whose call ended without running (rejected, expired): a replay of
    the same request answers that ending."""
    sql = (
        f"UPDATE {TABLE} SET state = 'recorded', recorded_at = {now_sql()} "
        "WHERE \"key\" = %s AND state = 'claimed'"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [key])
        return cursor.rowcount == 1
