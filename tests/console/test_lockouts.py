"""/console/lockouts/: operators see who is locked out from where, and unlock them."""

from __future__ import annotations

from typing import Any

import pytest
from axes.models import AccessAttempt
from django.test import Client

from .conftest import PASSWORD, logged_in
from .test_login_lockout import fail_five_times, login

pytestmark = pytest.mark.django_db


@pytest.fixture
def locked_rita(reviewer: Any) -> Client:
    client = Client(REMOTE_ADDR="10.1.2.3")
    fail_five_times(client, "rita")
    return client


def test_it_lists_current_lockouts(operator_client: Client, locked_rita: Client) -> None:
    fail_five_times(Client(), "ghost")  # no such user: still counted, still locked
    login(Client(), "rita", "wrong")  # one failure is not a lockout

    response = operator_client.get("/console/lockouts/")

    assert response.status_code == 200
    rows = [
        (lock.username, lock.ip_address, lock.failures) for lock in response.context["lockouts"]
    ]
    assert sorted(rows) == [("ghost", "127.0.0.1", 5), ("rita", "10.1.2.3", 5)]
    assert b">Unlock</button>" in response.content


def test_it_shows_an_empty_list(operator_client: Client) -> None:
    response = operator_client.get("/console/lockouts/")

    assert b"No login is locked out." in response.content


def test_an_operators_unlock_lets_them_in(operator_client: Client, locked_rita: Client) -> None:
    assert login(locked_rita, "rita", PASSWORD).status_code == 429

    response = operator_client.post(
        "/console/lockouts/unlock/", {"username": "rita", "ip_address": "10.1.2.3"}
    )

    assert response.status_code == 302
    assert not AccessAttempt.objects.filter(username="rita").exists()
    assert login(locked_rita, "rita", PASSWORD).status_code == 302
    assert "Unlocked rita from 10.1.2.3" in operator_client.get("/console/lockouts/").text


def test_it_unlocks_only_that_address(operator_client: Client, locked_rita: Client) -> None:
    fail_five_times(Client(REMOTE_ADDR="10.9.9.9"), "rita")

    operator_client.post(
        "/console/lockouts/unlock/", {"username": "rita", "ip_address": "10.1.2.3"}
    )

    assert login(Client(REMOTE_ADDR="10.9.9.9"), "rita", PASSWORD).status_code == 429


def test_a_superuser_may_unlock(superuser: Any, locked_rita: Client) -> None:
    client = logged_in(superuser)

    assert client.get("/console/lockouts/").status_code == 200
    client.post("/console/lockouts/unlock/", {"username": "rita", "ip_address": "10.1.2.3"})
    assert not AccessAttempt.objects.exists()


@pytest.mark.parametrize("persona", ["reviewer", "support"])
def test_others_may_not_see_or_unlock(persona: str, request: Any, locked_rita: Client) -> None:
    client = logged_in(request.getfixturevalue(persona))

    assert client.get("/console/lockouts/").status_code == 403
    response = client.post(
        "/console/lockouts/unlock/", {"username": "rita", "ip_address": "10.1.2.3"}
    )
    assert response.status_code == 403
    assert AccessAttempt.objects.filter(username="rita").exists()


def test_it_refuses_a_bad_address(operator_client: Client, locked_rita: Client) -> None:
    response = operator_client.post(
        "/console/lockouts/unlock/", {"username": "rita", "ip_address": "not-an-ip"}, follow=True
    )

    assert "Nothing was unlocked" in response.text
    assert AccessAttempt.objects.filter(username="rita").exists()


def test_it_shows_lockouts_in_the_nav_to_operators_only(
    operator_client: Client, reviewer_client: Client
) -> None:
    assert b'href="/console/lockouts/"' in operator_client.get("/console/").content
    assert b'href="/console/lockouts/"' not in reviewer_client.get("/console/").content
