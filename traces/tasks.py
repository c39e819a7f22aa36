"""Periodic work of traces/. A task loads nothing, calls a service and survives being
delivered twice."""

from __future__ import annotations

from celery import shared_task
from django.conf import settings

from traces.retention import retention_purge


@shared_task(acks_late=True)
def purge_traces() -> dict[str, int]:
    """Delete what is past retention (traces/retention.py): rows deleted per model. Safe
    to deliver twice, even at once: each batch deletes only what is still there, and
    runs are taken with SKIP LOCKED."""
    return retention_purge(days=settings.TOOLOPS_RETENTION_DAYS)
