"""Sealed args were keyed by the args hash, a hash of the normalised args that calls whose
args differ as sent share; they are keyed by the call's call_id now (traces/vault.py).
Each call of a row keyed the old way gets its own copy under its call_id; the old rows,
no longer referred to, go with the retention purge."""

from django.db import migrations

COPY = """
INSERT INTO traces_sealedargs (digest, token, created_at)
SELECT c.call_id, s.token, s.created_at
FROM toolops_toolcall c JOIN traces_sealedargs s ON s.digest = c.args_digest
WHERE TRUE
ON CONFLICT (digest) DO NOTHING
"""


class Migration(migrations.Migration):

    dependencies = [
        ('traces', '0002_retention'),
        ('toolops', '0009_retention'),
    ]

    operations = [
        # Backwards: the old rows are still there (until purged), keyed the old way.
        migrations.RunSQL(COPY, migrations.RunSQL.noop),
    ]
