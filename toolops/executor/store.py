"""A call's two writes — the claim with its call row, and the result with its attempts —
each in as few round trips as the database allows.

A call whose args had something redacted brings its sealed full args (traces.services
`sealed_row`): on PostgreSQL written by the same statement, as one more CTE, so sensitive
args cost no extra round trip; elsewhere one more INSERT in the same transaction. Args with
nothing sensitive cost nothing at all. A tool's searchable values (traces/search.py) land
the same way with the result: a CTE on PostgreSQL, an INSERT elsewhere, nothing without.

On PostgreSQL each is ONE statement (data-modifying CTEs), so it runs in autocommit:
atomic without a BEGIN and COMMIT of its own. That is 2 round trips a write call instead
of 9, and the difference is most of the executor's overhead. Elsewhere (SQLite, the
one-machine default) the same writes run as a short transaction of single statements."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass

from django.db import IntegrityError, connection, transaction
from django.db.models import Model

from toolops import rows
from toolops.models import Attempt, ToolCall
from toolops.policy import limits as spend
from toolops.policy.limits import Hold
from traces import services as traces

from . import claims

CALL_TABLE = "toolops_toolcall"
Sql = tuple[str, list[object]]
ATTEMPT_TABLE = "toolops_attempt"


def _savepoint_if_nested() -> AbstractContextManager[object]:
    # Alone, the statement is its own transaction. Inside someone's transaction, a
    # savepoint keeps a unique-key violation from aborting theirs.
    return transaction.atomic() if connection.in_atomic_block else nullcontext()


def _cte_ready() -> bool:
    return connection.vendor == "postgresql"


def _vault_cte(objs: Sequence[Model], guard: str = "") -> tuple[str, list[object]]:
    """`vault AS (INSERT …)` for the sealed args of `objs` (none: no CTE). Each row is
    its owner's own (a call's call_id, a compensation's key), so a conflict means a row
    already written for this owner: it keeps its token and has its `created_at` renewed,
    so that the retention purge, which re-tests the age of what it deletes, leaves it."""
    sealed = [row for row in map(traces.sealed_row, objs) if row is not None]
    if not sealed:
        return "", []
    fields = rows.insert_fields(type(sealed[0]))
    values, params = rows.values_sql(sealed, fields, typed=True)
    table = connection.ops.quote_name(sealed[0]._meta.db_table)
    sql = (
        f"vault AS (INSERT INTO {table} ({rows.columns(fields)}) "
        f"SELECT * FROM (VALUES {values}) AS v{guard} "
        "ON CONFLICT (digest) DO UPDATE SET created_at = EXCLUDED.created_at)"
    )
    return sql, params


def _keys_cte(keys: Sequence[Model], *, call_from: str = "") -> Sql:
    """`keys AS (INSERT …)` for a call's search index rows (traces/search.py). With
    `call_from`, the CTE that inserts the call, whose id the rows take."""
    table = connection.ops.quote_name(keys[0]._meta.db_table)
    if call_from:
        fields = rows.insert_fields(type(keys[0]), skip=("call",))
        values, params = rows.values_sql(keys, fields, typed=True, related_saved=False)
        return (
            f"keys AS (INSERT INTO {table} (call_id, {rows.columns(fields)}) "
            f"SELECT {call_from}.id, v.* FROM {call_from} CROSS JOIN (VALUES {values}) AS v)"
        ), params
    fields = rows.insert_fields(type(keys[0]))
    values, params = rows.values_sql(keys, fields, typed=True)
    # Only with the result, and a call recorded again (settled later) adds nothing twice.
    return (
        f"keys AS (INSERT INTO {table} ({rows.columns(fields)}) "
        f"SELECT * FROM (VALUES {values}) AS v WHERE EXISTS (SELECT 1 FROM upd) "
        "ON CONFLICT DO NOTHING)"
    ), params


def claim_with_call(call: ToolCall, *, lease_s: float, ttl_s: float) -> bool:
    """Claim the call's key and, only if won, insert the call row. Raises IntegrityError
    when the run already has a call with this tool_call_id (nothing is written then)."""
    return claim_and_charge(call, lease_s=lease_s, ttl_s=ttl_s, charge=None).won


@dataclass(frozen=True)
class Claimed:
    """What the claim statement did: `won` the key (and inserted the call); `charged`:
    what the run's charge returned (None: it changed nothing); `over`: the indexes of
    the spend holds that did not fit under their limits (then nothing was written)."""

    won: bool
    charged: bool | None = None
    over: tuple[int, ...] = ()


def claim_and_charge(
    call: ToolCall,
    *,
    lease_s: float,
    ttl_s: float,
    charge: Sql | None,
    holds: Sequence[Hold] = (),
) -> Claimed:
    """`claim_with_call`, and, only if won, `charge` — a conditional UPDATE of the run row
    RETURNING one boolean (budget.upfront) — in the same statement. `holds`: the agent
    policy's spend reservations (policy/limits.py), taken first in the same statement;
    the key is claimed only when every one fits, and one that fitted is given back when
    another did not, or when the key was lost (rare: two requests of one key racing)."""
    agent_id = call.run.agent_id if holds else 0
    if not _cte_ready():
        return _claim_statements(call, lease_s, ttl_s, charge, holds, agent_id)
    ctes, ctes_params = [], []
    for i, hold in enumerate(holds):
        sql, more = spend.reserve_sql(agent_id, hold)
        ctes.append(f"r{i} AS ({sql})")
        ctes_params += more
    reserved = " + ".join(f"(SELECT count(*) FROM r{i})" for i in range(len(holds)))
    claim_sql, claim_params = claims.claim_sql(
        key=call.idempotency_key,
        call_ref=call.call_id,
        tool=call.tool,
        lease_s=lease_s,
        ttl_s=ttl_s,
        only_if=f"{reserved} = {len(holds)}" if holds else "",
    )
    fields = rows.insert_fields(ToolCall)
    values, params = rows.values_sql([call], fields, typed=True)
    ctes.append(f"claim AS ({claim_sql})")
    ctes_params += claim_params
    vault, vault_params = _vault_cte([call], " WHERE EXISTS (SELECT 1 FROM claim)")
    if vault:
        ctes.append(vault)
        ctes_params += vault_params
    if charge is not None:
        sql, returning = charge[0].split(" RETURNING ", 1)
        ctes.append(
            f"charge AS ({sql} AND EXISTS (SELECT 1 FROM claim) RETURNING {returning} AS got)"
        )
        ctes_params += charge[1]
    insert = (
        f"INSERT INTO {CALL_TABLE} ({rows.columns(fields)}) "
        f"SELECT * FROM (VALUES {values}) AS v WHERE EXISTS (SELECT 1 FROM claim) RETURNING id"
    )
    ctes.append(f"ins AS ({insert})")
    each = "".join(f", (SELECT count(*) FROM r{i})" for i in range(len(holds)))
    got = "(SELECT got FROM charge)" if charge is not None else "NULL"
    sql = f"WITH {', '.join(ctes)} SELECT (SELECT id FROM ins), {got}{each}"
    with _savepoint_if_nested(), connection.cursor() as cursor:
        cursor.execute(sql, [*ctes_params, *params])
        row = cursor.fetchone()
    fitted = [bool(n) for n in row[2:]]
    if row[0] is None:
        # Not claimed: what was reserved is given back.
        spend.give_back(agent_id, [h.as_json() for h, ok in zip(holds, fitted, strict=True) if ok])
        return Claimed(False, over=tuple(i for i, ok in enumerate(fitted) if not ok))
    rows.mark_saved(call, row[0])
    return Claimed(True, None if row[1] is None else bool(row[1]))


def _claim_statements(
    call: ToolCall,
    lease_s: float,
    ttl_s: float,
    charge: Sql | None,
    holds: Sequence[Hold],
    agent_id: int,
) -> Claimed:
    """`claim_and_charge` without CTEs (SQLite): one statement each, in one transaction,
    rolled back whole when a hold does not fit."""
    claim_sql, claim_params = claims.claim_sql(
        key=call.idempotency_key,
        call_ref=call.call_id,
        tool=call.tool,
        lease_s=lease_s,
        ttl_s=ttl_s,
    )
    charged: bool | None = None
    try:
        with transaction.atomic():
            # Every hold or none (policy/limits.py), then the claim, in this transaction.
            over = spend.reserve_all(agent_id, holds) if holds else ()
            if over:
                raise _NotFitted(over)
            with connection.cursor() as cursor:
                cursor.execute(claim_sql, claim_params)
                if cursor.fetchone() is None:
                    raise _NotFitted(())
            rows.insert([call])
            traces.sealed_save(call)
            if charge is not None:
                with connection.cursor() as cursor:
                    cursor.execute(*charge)
                    row = cursor.fetchone()
                    charged = None if row is None else bool(row[0])
    except _NotFitted as lost:
        return Claimed(False, over=lost.over)
    return Claimed(True, charged)


class _NotFitted(Exception):
    """Rolls back a claim's transaction: a hold over its limit, or the key lost."""

    def __init__(self, over: tuple[int, ...]) -> None:
        self.over = over


def record_result(
    call: ToolCall,
    attempts: Sequence[Attempt],
    *,
    fence: int | None,
    fields: Sequence[str],
    also: Sequence[Model] = (),
    charge: Sql | None = None,
    keys: Sequence[Model] = (),
) -> bool:
    """Write a claimed call's result and its attempts. The result lands only while our
    fence holds the claim (False otherwise); the attempts happened, so they land anyway.
    `also`: rows (of one model) that land with the result, and only with it — the
    compensation a successful write registers. `charge`: the run's usage (budget.py),
    counted whether the result lands or not: the attempts were made. `keys`: the call's
    search index rows, which land with the result too (none: no CTE, no statement)."""
    if not _cte_ready():
        return _record_result_statements(call, attempts, fence, fields, also, charge, keys)
    ctes: list[str] = []
    params: list[object] = []
    guard = ""
    if fence is not None:
        sql, more = claims.record_sql(key=call.idempotency_key, fence=fence)
        ctes.append(f"rec AS ({sql})")
        params += more
        guard = " AND EXISTS (SELECT 1 FROM rec)"
    sql, more = rows.update_sql(call, fields)
    ctes.append(f"upd AS ({sql}{guard} RETURNING 1)")
    params += more
    if attempts:
        attempt_fields = rows.insert_fields(Attempt)
        values, more = rows.values_sql(attempts, attempt_fields)
        ctes.append(
            f"ins AS (INSERT INTO {ATTEMPT_TABLE} ({rows.columns(attempt_fields)}) VALUES {values})"
        )
        params += more
    if also:
        also_fields = rows.insert_fields(type(also[0]))
        values, more = rows.values_sql(also, also_fields, typed=True)
        table = connection.ops.quote_name(also[0]._meta.db_table)
        ctes.append(
            f"also AS (INSERT INTO {table} ({rows.columns(also_fields)}) "
            f"SELECT * FROM (VALUES {values}) AS v WHERE EXISTS (SELECT 1 FROM upd))"
        )
        params += more
        # The undo's args, mapped from the call, may hold its sensitive values.
        vault, more = _vault_cte(also, " WHERE EXISTS (SELECT 1 FROM upd)")
        if vault:
            ctes.append(vault)
            params += more
    if keys:
        sql, more = _keys_cte(keys)
        ctes.append(sql)
        params += more
    if charge is not None:
        ctes.append(f"usage AS ({charge[0]})")
        params += charge[1]
    with connection.cursor() as cursor:
        cursor.execute(f"WITH {', '.join(ctes)} SELECT count(*) FROM upd", params)
        return cursor.fetchone()[0] == 1


def _record_result_statements(
    call: ToolCall,
    attempts: Sequence[Attempt],
    fence: int | None,
    fields: Sequence[str],
    also: Sequence[Model],
    charge: Sql | None,
    keys: Sequence[Model],
) -> bool:
    """`record_result` without CTEs (SQLite): one statement each, in one transaction."""
    with transaction.atomic():
        recorded = fence is None or claims.record(key=call.idempotency_key, fence=fence)
        if recorded:
            rows.update(call, fields)
            rows.insert(also)
            for obj in also:
                traces.sealed_save(obj)
            traces.search_keys_save(keys)
        rows.insert(attempts)
        if charge is not None:
            with connection.cursor() as cursor:
                cursor.execute(*charge)
    return recorded


def insert_with_attempts(
    call: ToolCall,
    attempts: Sequence[Attempt],
    *,
    charge: Sql | None = None,
    keys: Sequence[Model] = (),
) -> None:
    """Insert a finished read call and its attempts (and `charge` the run's usage, and
    `keys` its search index rows). Raises IntegrityError when the run already has a call
    with this tool_call_id."""
    if not _cte_ready() or not attempts:
        with transaction.atomic():
            rows.insert([call])
            traces.sealed_save(call)
            traces.search_keys_save(keys)
            rows.insert(attempts)
            if charge is not None:
                with connection.cursor() as cursor:
                    cursor.execute(*charge)
        return
    call_fields = rows.insert_fields(ToolCall)
    call_values, params = rows.values_sql([call], call_fields)
    attempt_fields = rows.insert_fields(Attempt, skip=("call",))
    # The attempts' call is inserted by this same statement: its id comes from `c`.
    values, more = rows.values_sql(attempts, attempt_fields, typed=True, related_saved=False)
    vault, vault_params = _vault_cte([call])
    usage, usage_params = (f", usage AS ({charge[0]})", charge[1]) if charge else ("", [])
    index, index_params = _keys_cte(keys, call_from="c") if keys else ("", [])
    sql = (
        f"WITH c AS (INSERT INTO {CALL_TABLE} ({rows.columns(call_fields)}) VALUES {call_values} "
        "RETURNING id), "
        f"ins AS (INSERT INTO {ATTEMPT_TABLE} (call_id, {rows.columns(attempt_fields)}) "
        f"SELECT c.id, v.* FROM c CROSS JOIN (VALUES {values}) AS v)"
        f"{', ' + vault if vault else ''}{usage}{', ' + index if index else ''} "
        "SELECT id FROM c"
    )
    with _savepoint_if_nested(), connection.cursor() as cursor:
        cursor.execute(sql, [*params, *more, *vault_params, *usage_params, *index_params])
        rows.mark_saved(call, cursor.fetchone()[0])


def is_tool_call_id_clash(exc: IntegrityError) -> bool:
    """Whether an insert failed on the run's unique tool_call_id: another request with
    this tool_call_id got in first."""
    # PostgreSQL names the constraint; SQLite names the columns.
    text = str(exc)
    return "call_run_tool_call_id" in text or "toolops_toolcall.tool_call_id" in text
