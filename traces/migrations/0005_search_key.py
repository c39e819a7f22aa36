"""The search index of business keys by HMAC (traces/search.py), and pg_trgm for the run id
substring search (0006)."""

import django.db.models.deletion
from django.contrib.postgres.operations import TrigramExtension
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("toolops", "0015_audit_agent_rate_limit"),
        ("traces", "0004_replay_count_shards"),
    ]

    operations = [
        # On PostgreSQL only (the operation does nothing elsewhere).
        TrigramExtension(),
        migrations.CreateModel(
            name="SearchKey",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                (
                    "field",
                    models.CharField(
                        help_text="The catalog's path, e.g. order_id.", max_length=128
                    ),
                ),
                (
                    "digest",
                    models.CharField(
                        help_text="HMAC-SHA256 of the normalized value.", max_length=64
                    ),
                ),
                (
                    "call",
                    models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="toolops.toolcall",
                    ),
                ),
                (
                    "run",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="toolops.run",
                    ),
                ),
            ],
            options={
                "indexes": [models.Index(fields=["digest"], name="search_key_digest")],
                "constraints": [
                    models.UniqueConstraint(
                        fields=("call", "field", "digest"), name="search_key_unique"
                    )
                ],
            },
        ),
    ]
