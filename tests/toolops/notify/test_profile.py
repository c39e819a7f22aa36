"""Each person's notification choices (/console/account/notifications/, behind their name in the top
bar) and the operators' outbox page."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from tests.console.conftest import logged_in, make_user
from toolops.models import NotificationDelivery, NotificationEvent, NotificationPreference

pytestmark = pytest.mark.django_db


@pytest.fixture
def rita(django_user_model: Any) -> Any:
    return make_user(django_user_model, "rita", "reviewers", email="rita@example.com")


def choices(user: Any) -> dict[str, bool]:
    return dict(NotificationPreference.objects.filter(user=user).values_list("kind", "email"))


def test_a_reviewer_finds_their_choices_behind_their_name(rita: Any) -> None:
    client = logged_in(rita)
    runs = client.get("/console/").content.decode()
    assert 'class="user" href="/console/account/notifications/"' in runs

    page = client.get("/console/account/notifications/").content.decode()
    # Their group's kinds, on by default; no other group's.
    assert 'value="approval_waiting" id="id_kinds_0" checked' in page
    assert 'value="approval_expiring" id="id_kinds_1" checked' in page
    assert "ticket_opened" not in page
    assert 'value="rita@example.com"' in page


def test_a_reviewer_turns_a_kind_off_and_changes_their_address(rita: Any) -> None:
    answer = logged_in(rita).post(
        "/console/account/notifications/",
        {"email": "rita@shop.example", "kinds": ["approval_waiting"]},
        follow=True,
    )

    assert "Your notification choices are saved." in answer.content.decode()
    assert choices(rita) == {"approval_waiting": True, "approval_expiring": False}
    rita.refresh_from_db()
    assert rita.email == "rita@shop.example"


@pytest.mark.parametrize(
    ("data", "error"),
    [
        (
            {"email": "rita@example.com", "kinds": ["ticket_opened"]},
            "“ticket_opened” is not a notification you can receive: choose from the list.",
        ),
        (
            {"email": "rita at example", "kinds": ["approval_waiting"]},
            "That is not an e-mail address (it needs a name, @ and a domain).",
        ),
    ],
)
def test_bad_input_is_refused_with_a_clear_error_and_nothing_saved(
    rita: Any, data: dict[str, Any], error: str
) -> None:
    answer = logged_in(rita).post("/console/account/notifications/", data)

    assert answer.status_code == 400
    page = answer.content.decode()
    assert "Nothing was saved" in page
    assert error in page
    assert choices(rita) == {}
    rita.refresh_from_db()
    assert rita.email == "rita@example.com"


def test_operators_see_each_deliverys_state_and_error(django_user_model: Any) -> None:
    event = NotificationEvent.objects.create(
        key="approval_waiting:ap-1",
        kind="approval_waiting",
        ref="ap-1",
        subject="Approval waiting: Charge 89.00 EUR",
        link="http://localhost:8000/console/approvals/ap-1/",
    )
    NotificationDelivery.objects.create(
        event=event,
        channel="webhook",
        target="reviewers",
        status="failed",
        attempts=6,
        last_error="Could not connect to the webhook at chat.example.",
    )
    NotificationEvent.objects.create(
        key="approval_waiting:ap-2",
        kind="approval_waiting",
        ref="ap-2",
        note="The approval was approved before it was sent.",
    )
    olga: Client = logged_in(make_user(django_user_model, "olga", "operators"))

    page = olga.get("/console/notifications/").content.decode()

    assert "Approval waiting: Charge 89.00 EUR" in page
    assert "Could not connect to the webhook at chat.example." in page
    assert '<td class="num">6</td>' in page
    assert "The approval was approved before it was sent." in page
    sent_only = olga.get("/console/notifications/?status=sent").content.decode()
    assert "Could not connect" not in sent_only


def failed_delivery(status: str = "failed") -> NotificationDelivery:
    event = NotificationEvent.objects.create(
        key="breaker_opened:x:1", kind="breaker_opened", ref="x"
    )
    return NotificationDelivery.objects.create(
        event=event,
        channel="webhook",
        target="operators",
        status=status,
        attempts=6,
        last_error="Could not connect to the webhook at chat.example.",
    )


def test_an_operator_sends_a_failed_message_again(
    django_user_model: Any, django_capture_on_commit_callbacks: Any
) -> None:
    delivery = failed_delivery()
    olga = logged_in(make_user(django_user_model, "olga", "operators"))

    with django_capture_on_commit_callbacks() as woken:
        answer = olga.post(f"/console/notifications/{delivery.pk}/retry/", follow=True)

    assert "The message to operators will be sent again now." in answer.content.decode()
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts) == ("pending", 0)
    assert len(woken) == 1


def test_only_a_failed_message_can_be_sent_again(
    django_user_model: Any, django_capture_on_commit_callbacks: Any
) -> None:
    delivery = failed_delivery(status="sent")
    olga = logged_in(make_user(django_user_model, "olga", "operators"))

    with django_capture_on_commit_callbacks() as woken:
        answer = olga.post(f"/console/notifications/{delivery.pk}/retry/", follow=True)

    page = answer.content.decode()
    assert "Only a failed message can be sent again: this one is sent." in page
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts) == ("sent", 6) and woken == []
    assert olga.post("/console/notifications/987654/retry/").status_code == 404
