"""Login lockout (API.md "Processes and settings"): 5 failed logins for one username from
one address lock that pair for 15 minutes with a 429 page, the right password included;
other usernames and other addresses are not affected; /admin/'s login is the same."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from axes.models import AccessAttempt
from django.test import Client

from .conftest import PASSWORD

pytestmark = pytest.mark.django_db

WRONG = "not-the-password"


def login(client: Client, username: str, password: str, path: str = "/console/login/") -> Any:
    return client.post(path, {"username": username, "password": password})


def fail_five_times(client: Client, username: str, path: str = "/console/login/") -> list[int]:
    return [login(client, username, WRONG, path).status_code for _ in range(5)]


def is_logged_in(client: Client) -> bool:
    return "_auth_user_id" in client.session


def test_it_counts_four_failures_without_locking(reviewer: Any) -> None:
    client = Client()
    statuses = [login(client, "rita", WRONG).status_code for _ in range(4)]

    assert statuses == [200, 200, 200, 200]
    assert login(client, "rita", PASSWORD).status_code == 302
    assert is_logged_in(client)


def test_it_locks_after_five_failures_even_for_the_right_password(reviewer: Any) -> None:
    client = Client()

    assert fail_five_times(client, "rita") == [200, 200, 200, 200, 429]
    response = login(client, "rita", PASSWORD)

    assert response.status_code == 429
    page = response.content.decode()
    assert "Login locked" in page
    assert "rita" in page and "127.0.0.1" in page
    assert "15 more minutes" in page
    assert 0 < int(response["Retry-After"]) <= 15 * 60
    assert not is_logged_in(client)


def test_it_leaves_another_username_from_the_same_address_alone(
    reviewer: Any, operator: Any
) -> None:
    client = Client()
    fail_five_times(client, "rita")

    response = login(client, "olga", PASSWORD)

    assert response.status_code == 302
    assert is_logged_in(client)


def test_it_leaves_the_same_username_from_another_address_alone(reviewer: Any) -> None:
    fail_five_times(Client(REMOTE_ADDR="10.0.0.1"), "rita")
    elsewhere = Client(REMOTE_ADDR="10.0.0.2")

    response = login(elsewhere, "rita", PASSWORD)

    assert response.status_code == 302
    assert is_logged_in(elsewhere)


def test_it_locks_the_admin_login_the_same_way(superuser: Any) -> None:
    client = Client()

    assert fail_five_times(client, "admin", "/admin/login/") == [200, 200, 200, 200, 429]
    assert login(client, "admin", PASSWORD, "/admin/login/").status_code == 429
    # One count for both doors: the console's login is locked too.
    assert login(client, "admin", PASSWORD).status_code == 429
    assert not is_logged_in(client)


def test_it_logs_in_to_the_admin_through_the_same_login(superuser: Any) -> None:
    client = Client()

    response = client.post(
        "/admin/login/?next=/admin/", {"username": "admin", "password": PASSWORD, "next": "/admin/"}
    )

    assert response.status_code == 302
    assert response["Location"] == "/admin/"
    assert client.get("/admin/").status_code == 200


def test_it_unlocks_by_itself_after_15_minutes(reviewer: Any) -> None:
    client = Client()
    fail_five_times(client, "rita")
    # Tries while locked are refused without being counted: they do not extend the lock.
    for _ in range(3):
        assert login(client, "rita", PASSWORD).status_code == 429

    AccessAttempt.objects.update(
        attempt_time=AccessAttempt.objects.get().attempt_time - timedelta(minutes=15, seconds=1)
    )

    assert login(client, "rita", PASSWORD).status_code == 302


def test_it_does_not_take_the_address_from_x_forwarded_for(reviewer: Any) -> None:
    client = Client()
    for n in range(5):
        login_with = {"HTTP_X_FORWARDED_FOR": f"203.0.113.{n}"}
        client.post("/console/login/", {"username": "rita", "password": WRONG}, **login_with)

    response = client.post(
        "/console/login/",
        {"username": "rita", "password": PASSWORD},
        HTTP_X_FORWARDED_FOR="198.51.100.7",
    )

    assert response.status_code == 429
    assert set(AccessAttempt.objects.values_list("ip_address", flat=True)) == {"127.0.0.1"}
