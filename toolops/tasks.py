"""Periodic and background work of the executor. Tasks load by key, call a service, and
survive being delivered twice."""

from __future__ import annotations

from celery import shared_task
from django.db.models.functions import Now

from toolops.models import IdempotencyRecord


@shared_task(acks_late=True)
def idempotency_purge(batch: int = 5000) -> int:
    """Delete recorded idempotency records past their retention (claims are left to the
    stale-claim sweep)."""
    ids = list(
        IdempotencyRecord.objects.filter(
            state=IdempotencyRecord.State.RECORDED, expires_at__lt=Now()
        ).values_list("pk", flat=True)[:batch]
    )
    IdempotencyRecord.objects.filter(pk__in=ids).delete()
    return len(ids)
