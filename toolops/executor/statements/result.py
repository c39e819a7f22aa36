"""The record: a call's result with its attempts, under the claim's fencing token (a write),
or the finished call inserted with its attempts (a read) — with the compensation a
successful write registers, the call's search index rows and the run's usage, in ONE
statement on PostgreSQL, and as one short transaction of single statements on SQLite,
side by side below."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import connection, transaction
from django.db.models import Model

from toolops import rows
from toolops.executor import claims
from toolops.executor.budget import Charge
from toolops.models import Attempt, ToolCall
from traces import services as traces
from traces.models import SearchKey

from .parts import Sql, ctes_run, keys_cte, savepoint_if_nested, vault_cte

CALL_TABLE = ToolCall._meta.db_table
ATTEMPT_TABLE = Attempt._meta.db_table


def record_result(
    call: ToolCall,
    attempts: Sequence[Attempt],
    *,
    fence: int | None,
    fields: Sequence[str],
    also: Sequence[Model] = (),
    charge: Charge | None = None,
    keys: Sequence[SearchKey] = (),
) -> bool:
    """Write a claimed call's result and its attempts. The result lands only while our
    fence holds the claim (False otherwise); the attempts happened, so they land anyway.
    `also`: rows (of one model) that land with the result, and only with it — the
    compensation a successful write registers. `charge`: the run's usage (budget.py),
    counted whether the result lands or not: the attempts were made. `keys`: the call's
    search index rows, which land with the result too (none: no CTE, no statement)."""
    if not ctes_run():
        return _record_in_transaction(call, attempts, fence, fields, also, charge, keys)
    sql, params = _record_sql(call, attempts, fence, fields, also, charge, keys)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        (landed,) = cursor.fetchone()
    return landed == 1


def _record_sql(
    call: ToolCall,
    attempts: Sequence[Attempt],
    fence: int | None,
    fields: Sequence[str],
    also: Sequence[Model],
    charge: Charge | None,
    keys: Sequence[SearchKey],
) -> Sql:
    """PostgreSQL: `WITH rec, upd, ins, also, vault, keys, usage SELECT count(*) FROM upd`."""
    ctes: list[str] = []
    params: list[Any] = []
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
        vault, more = vault_cte(also, " WHERE EXISTS (SELECT 1 FROM upd)")
        if vault:
            ctes.append(vault)
            params += more
    if keys:
        sql, more = keys_cte(keys)
        ctes.append(sql)
        params += more
    if charge is not None:
        ctes.append(f"usage AS ({charge.sql()})")
        params += charge.params
    return f"WITH {', '.join(ctes)} SELECT count(*) FROM upd", params


def _record_in_transaction(
    call: ToolCall,
    attempts: Sequence[Attempt],
    fence: int | None,
    fields: Sequence[str],
    also: Sequence[Model],
    charge: Charge | None,
    keys: Sequence[SearchKey],
) -> bool:
    """SQLite: `record_result`'s writes, one statement each, in one transaction."""
    with transaction.atomic():
        recorded = fence is None or claims.record(key=call.idempotency_key, fence=fence)
        if recorded:
            rows.update(call, fields)
            rows.insert(also)
            for obj in also:
                traces.sealed_save(obj)
            traces.search_keys_save(keys)
        rows.insert(attempts)
        _charge(charge)
    return recorded


def insert_with_attempts(
    call: ToolCall,
    attempts: Sequence[Attempt],
    *,
    charge: Charge | None = None,
    keys: Sequence[SearchKey] = (),
) -> None:
    """Insert a finished read call and its attempts (and `charge` the run's usage, and
    `keys` its search index rows). Raises IntegrityError when the run already has a call
    with this tool_call_id."""
    if not ctes_run() or not attempts:
        with transaction.atomic():
            rows.insert([call])
            traces.sealed_save(call)
            traces.search_keys_save(keys)
            rows.insert(attempts)
            _charge(charge)
        return
    call_fields = rows.insert_fields(ToolCall)
    call_values, params = rows.values_sql([call], call_fields)
    attempt_fields = rows.insert_fields(Attempt, skip=("call",))
    # The attempts' call is inserted by this same statement: its id comes from `c`.
    values, more = rows.values_sql(attempts, attempt_fields, typed=True, related_saved=False)
    params += more
    ctes = [
        f"c AS (INSERT INTO {CALL_TABLE} ({rows.columns(call_fields)}) VALUES {call_values} "
        "RETURNING id)",
        f"ins AS (INSERT INTO {ATTEMPT_TABLE} (call_id, {rows.columns(attempt_fields)}) "
        f"SELECT c.id, v.* FROM c CROSS JOIN (VALUES {values}) AS v)",
    ]
    vault, more = vault_cte([call])
    if vault:
        ctes.append(vault)
        params += more
    if charge is not None:
        ctes.append(f"usage AS ({charge.sql()})")
        params += charge.params
    if keys:
        index, more = keys_cte(keys, call_from="c")
        ctes.append(index)
        params += more
    with savepoint_if_nested(), connection.cursor() as cursor:
        cursor.execute(f"WITH {', '.join(ctes)} SELECT id FROM c", params)
        (call_pk,) = cursor.fetchone()
    rows.mark_saved(call, call_pk)


def _charge(charge: Charge | None) -> None:
    if charge is not None:
        with connection.cursor() as cursor:
            cursor.execute(charge.sql(), charge.params)
