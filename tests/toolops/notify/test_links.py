"""The signed link in a person's e-mail (toolops/notify/links.py): it tells the page who
it was sent to and when it was opened; a changed, foreign, old or moved link opens the
page as it is, saying so, and records nothing."""

from __future__ import annotations

from typing import Any

import pytest
from django.core import signing

from toolops.notify import links
from toolops.notify.models import NotificationDelivery, NotificationEvent

pytestmark = pytest.mark.django_db
PAGE = "/console/approvals/ap-1/"


@pytest.fixture
def delivery(django_user_model: Any) -> NotificationDelivery:
    rita = django_user_model.objects.create_user("rita", "rita@example.com", "x")
    event = NotificationEvent.objects.create(
        key="approval_waiting:ap-1",
        kind="approval_waiting",
        ref="ap-1",
        link="http://console.example/console/approvals/ap-1/",
    )
    return NotificationDelivery.objects.create(
        event=event, channel="email", target="rita@example.com", user=rita, status="sent"
    )


def _token(url: str) -> str:
    return url.split(f"?{links.PARAM}=", 1)[1]


def test_the_person_it_was_sent_to_opens_it_once_recorded(delivery: Any) -> None:
    token = _token(links.signed(delivery.event.link, delivery.pk))

    said = links.opened(token, delivery.user, page=PAGE)
    first = NotificationDelivery.objects.get(pk=delivery.pk).opened_at
    links.opened(token, delivery.user, page=PAGE)

    assert said.startswith("You followed the link ToolOps e-mailed you at ")
    assert first is not None
    assert NotificationDelivery.objects.get(pk=delivery.pk).opened_at == first


def test_a_changed_foreign_or_old_link_is_said_so_and_records_nothing(
    delivery: Any, django_user_model: Any
) -> None:
    token = _token(links.signed(delivery.event.link, delivery.pk))
    raj = django_user_model.objects.create_user("raj", "raj@example.com", "x")
    old = signing.dumps(delivery.pk, salt=links.SALT)

    def opened(token: str, user: Any, **kwargs: Any) -> str:
        return links.opened(token, user, page=PAGE, **kwargs)

    assert "not one ToolOps sent" in opened(token[:-2] + "xx", delivery.user)
    assert "not one ToolOps sent" in opened(signing.dumps(delivery.pk), delivery.user)
    assert "sent to someone else" in opened(token, raj)
    assert "older than two weeks" in opened(old, delivery.user, max_age_s=-1)
    assert opened("", delivery.user) == ""
    assert NotificationDelivery.objects.get(pk=delivery.pk).opened_at is None


def test_a_link_moved_onto_another_page_is_said_so_and_records_nothing(delivery: Any) -> None:
    token = _token(links.signed(delivery.event.link, delivery.pk))

    for page in ("/console/approvals/ap-2/", "/console/tickets/1/", "/console/approvals/"):
        said = links.opened(token, delivery.user, page=page)
        assert said == "This link was sent for another page: here is this page as it is now."
    assert NotificationDelivery.objects.get(pk=delivery.pk).opened_at is None


def test_under_a_path_prefix_the_page_is_still_the_links_own(delivery: Any, settings: Any) -> None:
    # Served under /toolops: the link carries the prefix, the page's path_info does not.
    settings.TOOLOPS_PUBLIC_URL = "https://example.com/toolops/"
    NotificationEvent.objects.update(link="https://example.com/toolops/console/approvals/ap-1/")
    token = _token(links.signed(delivery.event.link, delivery.pk))

    said = links.opened(token, delivery.user, page=PAGE)

    assert said.startswith("You followed the link ToolOps e-mailed you at ")
