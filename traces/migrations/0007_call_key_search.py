"""An index for the console search by idempotency key (PostgreSQL only; docs/search.md):
without it a query of 64 hex characters read the whole call table (a sequential scan of
10 million calls in bench/flat.py).

A hash index on NULLIF(idempotency_key, ''), which the search's look-up names as it is
(traces/console/search.py): the search only ever asks for a whole key (equality), and a
hash index stores a 4-byte hash per call where a B-tree would store the 64-character key,
so it is a fraction of the size and cheaper to keep in memory on the write path, which
adds one entry per call. Calls without a key (refused before one was made) are NULL in
it and not indexed: no overflow chain of empty keys. Built CONCURRENTLY: a large call
table keeps taking writes meanwhile; then ANALYZE, so that the planner has the
expression's statistics at once (without them it guesses thousands of calls per key and
may walk the runs by date instead: seconds on a large table). Not part of ToolCall's model state (it belongs to
the search); SQLite answers the look-up by a scan."""

from django.db import migrations

NAME = "call_idempotency_key_hash"


def create(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(
            f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {NAME} ON toolops_toolcall "
            "USING hash ((NULLIF(idempotency_key, '')))"
        )
        schema_editor.execute("ANALYZE toolops_toolcall")


def drop(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {NAME}")


class Migration(migrations.Migration):
    atomic = False  # CREATE INDEX CONCURRENTLY runs outside a transaction

    dependencies = [("traces", "0006_run_id_search")]

    operations = [migrations.RunPython(create, drop, elidable=False)]
