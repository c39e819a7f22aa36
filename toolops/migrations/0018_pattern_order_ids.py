"""tool_call_id and trace_id indexed in pattern order (varchar_pattern_ops), so that the
console's runs filter, which matches the start of either (LIKE 'q%'), reads an index
instead of the whole call or run table: the database's collation is not "C", so a B-tree
in its order cannot serve a prefix (at 10 million calls the filter ran past the statement
timeout, bench/flat.py). A pattern-order B-tree answers equality too, so each replaces
the column's plain index: the write path keeps one index per column.

On PostgreSQL the new index is built CONCURRENTLY before the old one is dropped (also
CONCURRENTLY): a large table keeps taking writes meanwhile. SQLite has no pattern order:
a plain index under the new name."""

from django.db import migrations, models

# (table, column, the index's name now, its name before)
SWAPS = [
    ("toolops_toolcall", "tool_call_id", "call_tool_call_id", "toolops_too_tool_ca_e16fbd_idx"),
    ("toolops_run", "trace_id", "run_trace_id", "toolops_run_trace_i_638d18_idx"),
]


def _swap(schema_editor, *, forward: bool) -> None:
    postgres = schema_editor.connection.vendor == "postgresql"
    concurrently = " CONCURRENTLY" if postgres else ""
    for table, column, new, old in SWAPS:
        create, drop = (new, old) if forward else (old, new)
        order = " varchar_pattern_ops" if postgres and create == new else ""
        schema_editor.execute(
            f"CREATE INDEX{concurrently} IF NOT EXISTS {create} ON {table} ({column}{order})"
        )
        schema_editor.execute(f"DROP INDEX{concurrently} IF EXISTS {drop}")


def forwards(apps, schema_editor):
    _swap(schema_editor, forward=True)


def backwards(apps, schema_editor):
    _swap(schema_editor, forward=False)


class Migration(migrations.Migration):
    atomic = False  # CREATE / DROP INDEX CONCURRENTLY run outside a transaction

    dependencies = [("toolops", "0017_mcp_sessions")]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.RemoveIndex(model_name="run", name="toolops_run_trace_i_638d18_idx"),
                migrations.RemoveIndex(
                    model_name="toolcall", name="toolops_too_tool_ca_e16fbd_idx"
                ),
                migrations.AddIndex(
                    model_name="run",
                    index=models.Index(
                        fields=["trace_id"], name="run_trace_id", opclasses=["varchar_pattern_ops"]
                    ),
                ),
                migrations.AddIndex(
                    model_name="toolcall",
                    index=models.Index(
                        fields=["tool_call_id"],
                        name="call_tool_call_id",
                        opclasses=["varchar_pattern_ops"],
                    ),
                ),
            ],
            database_operations=[migrations.RunPython(forwards, backwards, elidable=False)],
        )
    ]
