"""Console sessions end after 8 idle hours (not two weeks): a person's requests slide the
expiry, a live page's polling does not, and the executor API never touches a session."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.sessions.models import Session
from django.db.models import F
from django.test import Client
from django.utils import timezone

from toolops.accounts.middleware import TOUCHED_KEY

from .conftest import PASSWORD

pytestmark = pytest.mark.django_db

EIGHT_HOURS = timedelta(hours=8)


def logged_in_by_password(username: str) -> Client:
    client = Client()
    response = client.post("/console/login/", {"username": username, "password": PASSWORD})
    assert response.status_code == 302
    return client


def stored(client: Client) -> Session:
    return Session.objects.get(session_key=client.session.session_key)


def age_session(client: Client, by: timedelta) -> None:
    """As if `by` had passed since the session's last write."""
    session = client.session
    session[TOUCHED_KEY] = int(session[TOUCHED_KEY] - by.total_seconds())
    session.save()
    Session.objects.filter(session_key=session.session_key).update(
        expire_date=F("expire_date") - by
    )


def test_a_login_lasts_eight_hours(reviewer: Any) -> None:
    client = logged_in_by_password("rita")

    left = stored(client).expire_date - timezone.now()
    assert EIGHT_HOURS - timedelta(minutes=1) < left <= EIGHT_HOURS
    assert client.cookies["sessionid"]["max-age"] == 8 * 3600


def test_a_session_idle_for_eight_hours_goes_back_to_the_login_page(reviewer: Any) -> None:
    client = logged_in_by_password("rita")
    assert client.get("/console/").status_code == 200

    age_session(client, EIGHT_HOURS + timedelta(seconds=1))
    response = client.get("/console/")

    assert response.status_code == 302
    assert response["Location"].startswith("/console/login/")


def test_a_persons_request_slides_the_expiry(reviewer: Any) -> None:
    client = logged_in_by_password("rita")
    age_session(client, timedelta(hours=7))

    assert client.get("/console/").status_code == 200

    left = stored(client).expire_date - timezone.now()
    assert left > EIGHT_HOURS - timedelta(minutes=1)


def test_a_live_pages_polling_does_not_slide_the_expiry(reviewer: Any) -> None:
    client = logged_in_by_password("rita")
    age_session(client, timedelta(hours=7))

    assert client.get("/console/approvals/", HTTP_HX_REQUEST="true").status_code == 200

    left = stored(client).expire_date - timezone.now()
    assert left < timedelta(hours=1)


def test_it_writes_the_session_at_most_once_a_minute(reviewer: Any) -> None:
    client = logged_in_by_password("rita")
    before = stored(client).expire_date

    client.get("/console/")
    client.get("/console/")

    assert stored(client).expire_date == before
