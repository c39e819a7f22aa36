"""A trigram index on run ids (PostgreSQL only), so that the console search finds runs by
any part of their id (`run_id LIKE '%…%'`) without reading the whole run table. Built
CONCURRENTLY: a large run table keeps taking writes while it is built. The index is not
part of Run's model state (it belongs to the search, not to toolops' models); SQLite
answers the same LIKE by a scan."""

from django.db import migrations

INDEX = "run_run_id_trgm"


def create(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(
            f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {INDEX} "
            "ON toolops_run USING gin (run_id gin_trgm_ops)"
        )


def drop(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {INDEX}")


class Migration(migrations.Migration):
    atomic = False  # CREATE INDEX CONCURRENTLY runs outside a transaction

    dependencies = [("traces", "0005_search_key")]

    operations = [migrations.RunPython(create, drop, elidable=False)]
