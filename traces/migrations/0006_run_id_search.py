"""Two indexes on run ids (PostgreSQL only), so that the console search finds runs by a
part of their id without reading the whole run table (docs/search.md): a trigram index
for `run_id LIKE '%…%'`, and a B-tree in pattern order for `run_id LIKE '…%'` (the
database's collation is not "C", so the unique (agent, run_id) index cannot serve it,
and the trigram index estimates a common prefix badly). Built CONCURRENTLY: a large run
table keeps taking writes meanwhile. They are not part of Run's model state (they belong
to the search, not to toolops' models); SQLite answers the same LIKEs by a scan."""

from django.db import migrations

INDEXES = {
    "run_run_id_trgm": "USING gin (run_id gin_trgm_ops)",
    "run_run_id_prefix": "(run_id varchar_pattern_ops)",
}


def create(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        for name, how in INDEXES.items():
            schema_editor.execute(
                f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {name} ON toolops_run {how}"
            )


def drop(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        for name in INDEXES:
            schema_editor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")


class Migration(migrations.Migration):
    atomic = False  # CREATE INDEX CONCURRENTLY runs outside a transaction

    dependencies = [("traces", "0005_search_key")]

    operations = [migrations.RunPython(create, drop, elidable=False)]
