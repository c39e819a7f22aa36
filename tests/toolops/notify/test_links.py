"""The signed link in a person's e-mail (toolops/notify/links.py): it tells the page who
it was sent to and when it was opened; a changed, foreign or old link opens the page as
it is, saying so, and records nothing."""

from __future__ import annotations

from typing import Any

import pytest
from django.core import signing

from toolops.notify import links
from toolops.notify.models import NotificationDelivery, NotificationEvent

pytestmark = pytest.mark.django_db


@pytest.fixture
def delivery(django_user_model: Any) -> NotificationDelivery:
    rita = django_user_model.objects.create_user("rita", "rita@example.com", "x")
    event = NotificationEvent.objects.create(
        key="approval_waiting:ap-1", kind="approval_waiting", ref="ap-1",
        link="http://console.example/console/approvals/ap-1/",
    )  # fmt: skip
    return NotificationDelivery.objects.create(
        event=event, channel="email", target="rita@example.com", user=rita, status="sent"
    )


def _token(url: str) -> str:
    return url.split(f"?{links.PARAM}=", 1)[1]


def test_the_person_it_was_sent_to_opens_it_once_recorded(delivery: Any) -> None:
    token = _token(links.signed(delivery.event.link, delivery.pk))

    said = links.opened(token, delivery.user)
    first = NotificationDelivery.objects.get(pk=delivery.pk).opened_at
    links.opened(token, delivery.user)

    assert said.startswith("You followed the link ToolOps e-mailed you at ")
    assert first is not None
    assert NotificationDelivery.objects.get(pk=delivery.pk).opened_at == first


def test_a_changed_foreign_or_old_link_is_said_so_and_records_nothing(
    delivery: Any, django_user_model: Any
) -> None:
    token = _token(links.signed(delivery.event.link, delivery.pk))
    raj = django_user_model.objects.create_user("raj", "raj@example.com", "x")
    old = signing.dumps(delivery.pk, salt=links.SALT)

    assert "not one ToolOps sent" in links.opened(token[:-2] + "xx", delivery.user)
    assert "not one ToolOps sent" in links.opened(signing.dumps(delivery.pk), delivery.user)
    assert "sent to someone else" in links.opened(token, raj)
    assert "older than two weeks" in links.opened(old, delivery.user, max_age_s=-1)
    assert links.opened("", delivery.user) == ""
    assert NotificationDelivery.objects.get(pk=delivery.pk).opened_at is None
