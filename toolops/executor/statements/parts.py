"""What the claim and the result statements build alike: the sealed args' vault rows and
the search index rows as CTEs, the savepoint a statement needs inside someone's
transaction, and how a clash on a run's tool_call_id is told from other errors.

A call whose args had something redacted brings its sealed full args (traces.services
`sealed_row`): on PostgreSQL written by the same statement, as one more CTE, so sensitive
args cost no extra round trip; elsewhere one more INSERT in the same transaction. Args
with nothing sensitive cost nothing at all. A tool's searchable values (traces/search.py)
land the same way with the result."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from django.db import IntegrityError, connection, transaction
from django.db.models import Model

from toolops import rows
from traces import services as traces
from traces.models import SearchKey

Sql = tuple[str, list[Any]]


def savepoint_if_nested() -> AbstractContextManager[object]:
    """Alone, a statement is its own transaction. Inside someone's transaction, a
    savepoint keeps a unique-key violation from aborting theirs."""
    return transaction.atomic() if connection.in_atomic_block else nullcontext()


def ctes_run() -> bool:
    """Whether the database runs data-modifying CTEs (PostgreSQL; not SQLite)."""
    return connection.vendor == "postgresql"


def vault_cte(objs: Sequence[Model], guard: str = "") -> Sql:
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


def keys_cte(keys: Sequence[SearchKey], *, call_from: str = "") -> Sql:
    """`keys AS (INSERT …)` for a call's search index rows (traces/search.py). With
    `call_from`, the CTE that inserts the call, whose id the rows take; without, they
    land only with the result (`upd`), and a call recorded again adds nothing twice."""
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
    return (
        f"keys AS (INSERT INTO {table} ({rows.columns(fields)}) "
        f"SELECT * FROM (VALUES {values}) AS v WHERE EXISTS (SELECT 1 FROM upd) "
        "ON CONFLICT DO NOTHING)"
    ), params


def is_tool_call_id_clash(exc: IntegrityError) -> bool:
    """Whether an insert failed on the run's unique tool_call_id: another request with
    this tool_call_id got in first."""
    # PostgreSQL names the constraint; SQLite names the columns.
    text = str(exc)
    return "call_run_tool_call_id" in text or "toolops_toolcall.tool_call_id" in text
