"""Sending a recipient's deliveries (toolops/notify/outbox.py): a message that cannot be
written takes none of the others down, every way a send fails ends in a retry or in
`failed` with a sentence on the outbox page, and `/metrics` counts what failed."""

from __future__ import annotations

from typing import Any

import pytest
from django.core import mail
from django.core.mail import BadHeaderError
from django.test import Client
from django.utils import timezone

from tests.console.conftest import logged_in, make_user
from tests.traces.metrics_scenario import samples
from toolops.notify import outbox
from toolops.notify.clean import HEADER_MAX
from toolops.notify.models import NotificationDelivery, NotificationEvent

from .receivers import WebhookReceiver

pytestmark = pytest.mark.django_db
RITA = "rita@example.com"
# A row whose facts are not (label, value) pairs: no message can be written from it.
NOT_PAIRS = [["Customer"]]
UNWRITTEN = (
    "Not sent: its content could not be written out. Sent on its own it failed the same "
    "way, so it is not tried again (the worker's log has the details)."
)


def event(n: int, *, fields: Any = None, subject: str = "") -> NotificationEvent:
    return NotificationEvent.objects.create(
        key=f"approval_waiting:ap-{n}",
        kind="approval_waiting",
        ref=f"ap-{n}",
        fanned_out_at=timezone.now(),
        subject=subject or f"Approval waiting: charge ord-{n}",
        text=f"Agent agent-a asks to run this call (order ord-{n}).",
        link=f"http://localhost:8000/console/approvals/ap-{n}/",
        fields=[["Order id", f"ord-{n}"]] if fields is None else fields,
    )


def queue(channel: str, target: str, *events: NotificationEvent) -> list[NotificationDelivery]:
    return [
        NotificationDelivery.objects.create(event=e, channel=channel, target=target) for e in events
    ]


def states() -> list[tuple[str, int, str]]:
    rows = NotificationDelivery.objects.order_by("pk")
    return list(rows.values_list("status", "attempts", "last_error"))


@pytest.fixture
def reviewers_hook(settings: Any) -> Any:
    receiver = WebhookReceiver()
    settings.TOOLOPS_WEBHOOKS = {"reviewers": (receiver.url, receiver.secret)}
    yield receiver
    receiver.stop()


@pytest.mark.parametrize("channel", ["email", "webhook"])
def test_a_message_that_cannot_be_written_fails_alone_and_the_others_are_sent(
    channel: str, reviewers_hook: WebhookReceiver, django_user_model: Any
) -> None:
    target = RITA if channel == "email" else "reviewers"
    queue(channel, target, event(1), event(2, fields=NOT_PAIRS), event(3))

    assert outbox.deliveries_send(channel=channel, target=target) == 2

    assert states() == [("sent", 1, ""), ("failed", 1, UNWRITTEN), ("sent", 1, "")]
    if channel == "email":
        assert [m.subject for m in mail.outbox] == [
            "[ToolOps] Approval waiting: charge ord-1",
            "[ToolOps] Approval waiting: charge ord-3",
        ]
    else:
        assert [h.body["events"][0]["key"] for h in reviewers_hook.hooks] == [
            "approval_waiting:ap-1",
            "approval_waiting:ap-3",
        ]
        assert all(h.signed for h in reviewers_hook.hooks)
    olga = logged_in(make_user(django_user_model, "olga", "operators"))
    page = olga.get("/console/notifications/?status=failed").content.decode()
    assert UNWRITTEN.replace("'", "&#x27;") in page and "Send again" in page


def test_a_lone_message_that_cannot_be_written_is_failed_at_once() -> None:
    queue("email", RITA, event(1, fields=NOT_PAIRS))

    assert outbox.deliveries_send(channel="email", target=RITA) == 0

    assert states() == [("failed", 1, UNWRITTEN)]
    assert mail.outbox == []
    # Nothing is left due: it is not taken up again.
    assert outbox.deliveries_send(channel="email", target=RITA) == 0


def test_a_webhook_taken_out_of_the_settings_is_a_failure_to_deliver_not_of_content(
    settings: Any, django_capture_on_commit_callbacks: Any
) -> None:
    settings.TOOLOPS_WEBHOOKS = {}  # the group's webhook removed after the fan-out
    queue("webhook", "reviewers", event(1), event(2))

    with django_capture_on_commit_callbacks():  # the retry's wake-up, not run here
        assert outbox.deliveries_send(channel="webhook", target="reviewers") == 0

    why = "No webhook is set for the group reviewers (TOOLOPS_WEBHOOK_REVIEWERS_URL); "
    assert [(status, error[: len(why)]) for status, _, error in states()] == [
        ("pending", why),
        ("pending", why),
    ]


def test_a_stored_subject_with_a_line_break_goes_out_as_one_header_line() -> None:
    # An event written before values were cleaned when stored, or by other code.
    first = event(1, subject="Approval waiting: dave\r\nBcc: x@evil.example " + "y" * 250)
    queue("email", RITA, first, event(2))

    assert outbox.deliveries_send(channel="email", target=RITA) == 2

    [message] = mail.outbox
    assert message.subject.startswith("[ToolOps] 2 approvals wait: dave Bcc: x@evil.example yyy")
    assert len(message.subject) == HEADER_MAX and message.subject.endswith("…")
    assert "Bcc" not in message.message() and message.bcc == []
    assert not any(line.startswith("Bcc:") for line in message.body.splitlines())


def test_the_sentence_names_what_was_wrong_never_the_exception() -> None:
    header = outbox.unwritable_reason(BadHeaderError("Header values can't contain newlines"))
    text = outbox.unwritable_reason(UnicodeEncodeError("utf-8", "\ud800", 0, 1, "surrogate"))

    assert header.startswith("Not sent: a value in it cannot go in a mail header.")
    assert text.startswith("Not sent: a value in it is not text that can be encoded.")
    assert not any(word in header + text for word in ("Error", "newlines", "surrogate"))


def test_tries_used_up_end_failed_with_the_last_error_and_are_counted_in_metrics(
    reviewers_hook: WebhookReceiver, settings: Any, django_capture_on_commit_callbacks: Any
) -> None:
    settings.TOOLOPS_NOTIFY_MAX_ATTEMPTS = 2
    settings.TOOLOPS_METRICS_CACHE_S = 0
    reviewers_hook.fail_with = 500
    queue("webhook", "reviewers", event(1), event(2))

    for _ in range(2):
        NotificationDelivery.objects.update(next_attempt_at=timezone.now())
        assert outbox.deliveries_send(channel="webhook", target="reviewers") == 0

    error = "The webhook at 127.0.0.1 answered 500 Internal Server Error."
    assert states() == [("failed", 2, error), ("failed", 2, error)]
    found = samples(Client().get("/metrics").content.decode())
    assert found[("toolops_notifications_failed", (("channel", "webhook"),))] == 2
    assert found[("toolops_notifications_failed", (("channel", "email"),))] == 0

    # Sent again by an operator and gone through: no longer counted.
    reviewers_hook.fail_with = None
    for delivery in NotificationDelivery.objects.all():
        with django_capture_on_commit_callbacks():
            assert outbox.delivery_retry(delivery_pk=delivery.pk)
    assert outbox.deliveries_send(channel="webhook", target="reviewers") == 2
    found = samples(Client().get("/metrics").content.decode())
    assert found[("toolops_notifications_failed", (("channel", "webhook"),))] == 0
