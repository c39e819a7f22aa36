"""Periodic tasks, called as task bodies (STYLE.md: no eager mode)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from toolops.models import IdempotencyRecord
from toolops.tasks import idempotency_purge

pytestmark = pytest.mark.django_db


def record(key: str, *, state: str, expires_in: timedelta) -> IdempotencyRecord:
    now = timezone.now()
    return IdempotencyRecord.objects.create(
        key=key, call_ref=f"c-{key}", tool="t", state=state,
        lease_until=now, expires_at=now + expires_in,
    )  # fmt: skip


def test_it_purges_expired_recorded_records_only() -> None:
    record("old", state="recorded", expires_in=timedelta(hours=-1))
    record("fresh", state="recorded", expires_in=timedelta(hours=1))
    record("claimed", state="claimed", expires_in=timedelta(hours=-1))

    assert idempotency_purge() == 1
    assert set(IdempotencyRecord.objects.values_list("key", flat=True)) == {"fresh", "claimed"}
    # Delivered twice: nothing more to do, no error.
    assert idempotency_purge() == 0
