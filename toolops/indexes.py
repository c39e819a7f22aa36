"""Index kinds the models declare beyond Django's portable B-tree."""

from __future__ import annotations

from typing import Any

from django.db import models


class EqualityIndex(models.Index):
    """For equality look-ups of a long random key that nothing sorts by (a hash digest):
    a hash index on PostgreSQL, a B-tree elsewhere. A hash index entry holds a 4-byte hash
    instead of the whole key, so it is a fraction of a B-tree's size and cheaper on every
    insert; it only answers `=`, which is all such a key is ever asked."""

    def create_sql(self, model: Any, schema_editor: Any, using: str = "", **kwargs: Any) -> Any:
        if schema_editor.connection.vendor == "postgresql":
            using = " USING hash"
        return super().create_sql(model, schema_editor, using=using, **kwargs)
