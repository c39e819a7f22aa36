"""The periodic sweep: an approval about to expire and a ticket nobody took are each
told once; an event whose worker message was lost is still sent, and one that cannot be
written stops neither the sweep nor the others; a send whose worker died is sent again,
until its tries are used up."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from compensations.models import Ticket
from tests.compensations.conftest import dead_letter
from tests.conftest import Shop
from tests.toolops.api.helpers import create_run, post_call
from toolops.models import Agent, Approval, NotificationDelivery, NotificationEvent
from toolops.notify import outbox, watch

pytestmark = pytest.mark.django_db


def kinds() -> list[str]:
    return sorted(NotificationEvent.objects.values_list("kind", flat=True))


def sweep(django_capture_on_commit_callbacks: Any) -> None:
    with django_capture_on_commit_callbacks():  # the worker's wake-ups are not sent
        watch.sweep()


@pytest.fixture
def approval(api: APIClient, shop: Shop, django_capture_on_commit_callbacks: Any) -> Approval:
    create_run(api)
    with django_capture_on_commit_callbacks():
        post_call(api, step_index=0, tool="charge", args={"order_id": "o", "amount": "1"})
    return Approval.objects.get()


def test_an_approval_in_the_last_fifth_of_its_time_is_told_once(
    approval: Approval, django_capture_on_commit_callbacks: Any
) -> None:
    now = timezone.now()
    # 30 minutes to live, 10 left: not yet.
    Approval.objects.update(
        created_at=now - timedelta(minutes=20), expires_at=now + timedelta(minutes=10)
    )
    sweep(django_capture_on_commit_callbacks)
    assert kinds() == ["approval_waiting"]

    # 4 of 30 minutes left: told, once however often the sweep passes.
    Approval.objects.update(
        created_at=now - timedelta(minutes=26), expires_at=now + timedelta(minutes=4)
    )
    sweep(django_capture_on_commit_callbacks)
    sweep(django_capture_on_commit_callbacks)
    assert kinds() == ["approval_expiring", "approval_waiting"]


def test_a_ticket_nobody_took_is_told_once_after_the_setting(
    agent_a: tuple[Agent, str], settings: Any, django_capture_on_commit_callbacks: Any
) -> None:
    settings.TOOLOPS_NOTIFY_TICKET_UNASSIGNED_S = 600
    ticket = dead_letter(agent_a[0])
    sweep(django_capture_on_commit_callbacks)
    assert kinds() == ["ticket_opened"]

    Ticket.objects.filter(pk=ticket.pk).update(opened_at=timezone.now() - timedelta(minutes=11))
    sweep(django_capture_on_commit_callbacks)
    sweep(django_capture_on_commit_callbacks)
    assert kinds() == ["ticket_opened", "ticket_unassigned"]


def test_an_event_whose_message_was_lost_is_fanned_out_by_the_sweep(
    approval: Approval, settings: Any, django_capture_on_commit_callbacks: Any
) -> None:
    settings.TOOLOPS_NOTIFY_GRACE_S = 30
    NotificationEvent.objects.update(created_at=timezone.now() - timedelta(minutes=1))

    sweep(django_capture_on_commit_callbacks)

    assert NotificationEvent.objects.get().fanned_out_at is not None


def test_an_event_that_cannot_be_written_stops_neither_the_sweep_nor_the_others(
    approval: Approval, settings: Any, django_capture_on_commit_callbacks: Any
) -> None:
    settings.TOOLOPS_NOTIFY_GRACE_S = 30
    old = timezone.now() - timedelta(minutes=1)
    NotificationEvent.objects.update(created_at=old)
    # Swept first: a ticket's event whose ticket number is not one.
    broken = NotificationEvent.objects.create(
        key="ticket_opened:x:1", kind="ticket_opened", ref="x", created_at=old - timedelta(1)
    )

    sweep(django_capture_on_commit_callbacks)
    sweep(django_capture_on_commit_callbacks)

    broken.refresh_from_db()
    assert broken.fanned_out_at is not None and broken.note == outbox.UNWRITTEN_EVENT
    assert NotificationEvent.objects.get(kind="approval_waiting").fanned_out_at is not None


def test_a_send_whose_worker_died_is_sent_again_and_on_its_last_try_failed(
    settings: Any, django_capture_on_commit_callbacks: Any
) -> None:
    settings.TOOLOPS_NOTIFY_MAX_ATTEMPTS = 3
    event = NotificationEvent.objects.create(
        key="approval_waiting:ap-1",
        kind="approval_waiting",
        ref="ap-1",
        fanned_out_at=timezone.now(),
        subject="Approval waiting: charge",
    )
    lease = timezone.now() - timedelta(seconds=5)
    for target, attempts in (("again@example.com", 2), ("last@example.com", 3)):
        NotificationDelivery.objects.create(
            event=event,
            channel="email",
            target=target,
            status="sending",
            attempts=attempts,
            lease_until=lease,
        )

    sweep(django_capture_on_commit_callbacks)

    rows = NotificationDelivery.objects.order_by("target")
    assert list(rows.values_list("target", "status", "last_error")) == [
        ("again@example.com", "pending", watch.SENDER_DIED),
        ("last@example.com", "failed", watch.SENDER_DIED_LAST),
    ]
