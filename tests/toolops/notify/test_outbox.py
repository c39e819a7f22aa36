"""The worker's side, one step at a time (task bodies called directly): who an event
reaches, what the message says, once-only sends, and events that no longer need anyone."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.core import mail
from django.utils import timezone
from rest_framework.test import APIClient

from tests.compensations.conftest import dead_letter
from tests.conftest import Shop
from tests.console.conftest import make_user
from tests.toolops.api.helpers import create_run, post_call
from toolops.models import (
    Agent,
    Approval,
    CircuitBreaker,
    NotificationDelivery,
    NotificationEvent,
    NotificationPreference,
)
from toolops.notify import events, outbox
from toolops.templatetags.when import day_words

from .receivers import WebhookReceiver

pytestmark = pytest.mark.django_db
CHARGE = {"order_id": "ord-1", "amount": "89.00", "currency": "EUR", "customer": "cus_42"}


@pytest.fixture
def held(api: APIClient, shop: Shop, django_capture_on_commit_callbacks: Any) -> Approval:
    create_run(api)
    with django_capture_on_commit_callbacks():
        assert post_call(api, step_index=0, tool="charge", args=CHARGE).status_code == 202
    return Approval.objects.get()


def fan_out(django_capture_on_commit_callbacks: Any) -> NotificationEvent:
    event = NotificationEvent.objects.get()
    with django_capture_on_commit_callbacks():  # the sends' wake-ups: called below
        outbox.event_fan_out(event_pk=event.pk)
    return NotificationEvent.objects.get()


def targets() -> set[str]:
    return set(NotificationDelivery.objects.values_list("target", flat=True))


def test_a_person_who_turned_a_kind_off_gets_no_email(
    held: Approval, django_user_model: Any, django_capture_on_commit_callbacks: Any
) -> None:
    make_user(django_user_model, "rita", "reviewers", email="rita@example.com")
    raj = make_user(django_user_model, "raj", "reviewers", email="raj@example.com")
    NotificationPreference.objects.create(user=raj, kind="approval_waiting", email=False)
    make_user(django_user_model, "noemail", "reviewers")
    make_user(django_user_model, "sam", "support", email="sam@example.com")
    django_user_model.objects.create_superuser("root", "root@example.com", "pw")
    sue = django_user_model.objects.create_superuser("sue", "sue@example.com", "pw")
    NotificationPreference.objects.create(user=sue, kind="approval_waiting", email=True)

    fan_out(django_capture_on_commit_callbacks)
    for address in sorted(targets()):
        outbox.deliveries_send(channel="email", target=address)

    # Superusers only when they opted in; nobody outside reviewers; no address, no mail.
    assert targets() == {"rita@example.com", "sue@example.com"}
    assert sorted(m.to[0] for m in mail.outbox) == ["rita@example.com", "sue@example.com"]


def test_the_message_has_the_facts_and_a_link_to_the_decision(
    held: Approval, django_user_model: Any, django_capture_on_commit_callbacks: Any, settings: Any
) -> None:
    settings.TOOLOPS_PUBLIC_URL = "https://toolops.example"
    make_user(django_user_model, "rita", "reviewers", email="rita@example.com")
    fan_out(django_capture_on_commit_callbacks)

    assert outbox.deliveries_send(channel="email", target="rita@example.com") == 1
    [message] = mail.outbox
    assert message.subject == (
        "[ToolOps] Approval waiting: Charge 89.00 EUR to customer cus_42 for order ord-1"
    )
    assert f"https://toolops.example/console/approvals/{held.approval_id}/" in message.body
    assert "Agent agent-a asks to run this call" in message.body
    assert "Amount: 89.00" in message.body and "Tool: charge" in message.body
    assert message.from_email == "ToolOps <toolops@localhost>"


def test_a_recipients_deliveries_are_sent_once(
    held: Approval, django_user_model: Any, django_capture_on_commit_callbacks: Any
) -> None:
    make_user(django_user_model, "rita", "reviewers", email="rita@example.com")
    fan_out(django_capture_on_commit_callbacks)
    # A duplicate message: the event is fanned out once.
    assert outbox.event_fan_out(event_pk=NotificationEvent.objects.get().pk) == 0

    assert outbox.deliveries_send(channel="email", target="rita@example.com") == 1
    assert outbox.deliveries_send(channel="email", target="rita@example.com") == 0
    assert len(mail.outbox) == 1
    assert NotificationDelivery.objects.get().status == "sent"


def test_an_approval_decided_before_the_send_tells_nobody(
    held: Approval, django_user_model: Any, django_capture_on_commit_callbacks: Any
) -> None:
    make_user(django_user_model, "rita", "reviewers", email="rita@example.com")
    Approval.objects.update(status=Approval.Status.APPROVED)

    event = fan_out(django_capture_on_commit_callbacks)

    assert targets() == set()
    assert event.note == "The approval was approved before it was sent."


def test_support_is_told_what_was_not_undone(
    agent_a: tuple[Agent, str],
    shop: Shop,
    django_user_model: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    make_user(django_user_model, "sam", "support", email="sam@example.com")
    make_user(django_user_model, "rita", "reviewers", email="rita@example.com")
    ticket = dead_letter(agent_a[0], error="503 Service Unavailable")

    event = fan_out(django_capture_on_commit_callbacks)
    outbox.deliveries_send(channel="email", target="sam@example.com")

    assert targets() == {"sam@example.com"}
    assert event.subject == f"Ticket #{ticket.pk}: Cancel order o-1 was not made"
    [message] = mail.outbox
    assert "Not made: Cancel order o-1. It was to undo: Order 1 × A12 for 19.90" in message.body
    assert f"/console/tickets/{ticket.pk}/" in message.body


def test_a_group_webhook_gets_a_signed_chat_message(
    held: Approval, django_capture_on_commit_callbacks: Any, settings: Any
) -> None:
    receiver = WebhookReceiver()
    try:
        settings.TOOLOPS_WEBHOOKS = {"reviewers": (receiver.url, receiver.secret)}
        fan_out(django_capture_on_commit_callbacks)
        assert outbox.deliveries_send(channel="webhook", target="reviewers") == 1
    finally:
        receiver.stop()

    [hook] = receiver.hooks
    assert hook.signed
    assert hook.body["text"] == (
        "Approval waiting: Charge 89.00 EUR to customer cus_42 for order ord-1 "
        f"http://localhost:8000/console/approvals/{held.approval_id}/"
    )
    assert hook.body["events"][0]["fields"]["Customer"] == "cus_42"


def test_a_webhook_with_a_wrong_secret_is_refused_and_retried_later(
    held: Approval, django_capture_on_commit_callbacks: Any, settings: Any
) -> None:
    receiver = WebhookReceiver()
    try:
        settings.TOOLOPS_WEBHOOKS = {"reviewers": (receiver.url, "not-the-receivers-secret")}
        fan_out(django_capture_on_commit_callbacks)
        with django_capture_on_commit_callbacks():
            assert outbox.deliveries_send(channel="webhook", target="reviewers") == 0
    finally:
        receiver.stop()

    delivery = NotificationDelivery.objects.get()
    assert (delivery.status, delivery.attempts) == ("pending", 1)
    assert delivery.last_error == "The webhook at 127.0.0.1 answered 401 Unauthorized."
    assert receiver.hooks[0].signed is False


def test_operators_are_told_a_tool_was_switched_off(
    django_user_model: Any, django_capture_on_commit_callbacks: Any
) -> None:
    make_user(django_user_model, "olga", "operators", email="olga@example.com")
    make_user(django_user_model, "rita", "reviewers", email="rita@example.com")
    breaker = CircuitBreaker.objects.create(
        tool="charge",
        state="open",
        reason="5 consecutive failures",
        opened_at=timezone.now(),
        open_until=timezone.now() + timedelta(seconds=90),
    )
    with django_capture_on_commit_callbacks():
        events.breaker_opened(tool="charge", opened_at="t1")

    event = fan_out(django_capture_on_commit_callbacks)

    assert targets() == {"olga@example.com"}
    assert event.subject == "Tool switched off: charge, after 5 consecutive failures"
    fields = dict(event.fields)
    assert fields["Why"] == "5 consecutive failures"
    # Absolute: "in 90 seconds" would be false by the time the message is read.
    assert fields["Tried again"] == f"from {day_words(breaker.open_until)}"
    assert event.link == "http://localhost:8000/console/health/"
