"""The database's clock: the one clock every web process and worker shares. A deadline
one process writes and another judges (an approval's expiry, a queued compensation's
grace, a claim's lease) is written and judged by it, never by a process clock: those
drift apart (a worker 5 s ahead would expire every approval 5 s early).

In a query, use `django.db.models.functions.Now()`; `now()` is for a value a process
must hold (an expiry to show, a deadline to compute before the write)."""

from __future__ import annotations

from datetime import datetime

from django.db import connection
from django.utils import timezone


def now() -> datetime:
    """The database's current time (one query on PostgreSQL; SQLite runs in this
    process, on this machine's one clock)."""
    if connection.vendor != "postgresql":
        return timezone.now()
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement_timestamp()")
        return cursor.fetchone()[0]
