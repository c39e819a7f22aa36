"""Abuse cases against people's accounts and agents' tokens: password guessing, dodging
the lockout, unlocking without the right, idle sessions, the second factor, and tokens
that should no longer work. One test per case (docs/accounts.md)."""

from __future__ import annotations

import io
from datetime import timedelta
from typing import Any

import pytest
from axes.models import AccessAttempt
from django.contrib.sessions.models import Session
from django.core.management import call_command
from django.db.models import F
from django.test import Client
from django_otp.plugins.otp_totp.models import TOTPDevice
from rest_framework.test import APIClient

from tests.console.conftest import PASSWORD, logged_in, make_user
from tests.console.test_two_factor import code_for, wrong_code
from toolops.services import agent_create

pytestmark = pytest.mark.django_db

WRONG = "not-the-password"


@pytest.fixture(autouse=True)
def fast_password_hashing(settings: Any) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def rita(django_user_model: Any) -> Any:
    return make_user(django_user_model, "rita", "reviewers")


@pytest.fixture
def olga(django_user_model: Any) -> Any:
    return make_user(django_user_model, "olga", "operators")


def login(client: Client, username: str, password: str, path: str = "/console/login/") -> Any:
    return client.post(path, {"username": username, "password": password})


def guess(client: Client, username: str, times: int = 5, path: str = "/console/login/") -> None:
    for _ in range(times):
        login(client, username, WRONG, path)


def api_status(token: str, run_id: str) -> int:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client.post("/api/v1/runs", {"run_id": run_id}, format="json").status_code


def test_it_refuses_the_right_password_after_five_wrong_ones(rita: Any) -> None:
    client = Client()
    guess(client, "rita")

    response = login(client, "rita", PASSWORD)

    assert response.status_code == 429
    assert "locked" in response.text
    assert "_auth_user_id" not in client.session


def test_guessing_one_username_does_not_lock_out_another(rita: Any, olga: Any) -> None:
    client = Client()
    guess(client, "rita")

    assert login(client, "olga", PASSWORD).status_code == 302


def test_guessing_from_one_address_does_not_lock_the_owner_out_elsewhere(rita: Any) -> None:
    guess(Client(REMOTE_ADDR="198.51.100.1"), "rita")

    assert login(Client(REMOTE_ADDR="198.51.100.2"), "rita", PASSWORD).status_code == 302


def test_a_forged_x_forwarded_for_does_not_dodge_the_lockout(rita: Any) -> None:
    client = Client()
    for n in range(5):
        client.post(
            "/console/login/",
            {"username": "rita", "password": WRONG},
            HTTP_X_FORWARDED_FOR=f"203.0.113.{n}",
        )

    response = client.post(
        "/console/login/",
        {"username": "rita", "password": PASSWORD},
        HTTP_X_FORWARDED_FOR="203.0.113.99",
    )

    assert response.status_code == 429


def test_guessing_through_the_admin_login_is_locked_too(django_user_model: Any) -> None:
    django_user_model.objects.create_superuser("root", "root@example.com", PASSWORD)
    client = Client()
    guess(client, "root", path="/admin/login/")

    assert login(client, "root", PASSWORD, "/admin/login/").status_code == 429
    assert client.get("/admin/").status_code == 302


def test_a_reviewer_cannot_unlock_a_login(rita: Any) -> None:
    guess(Client(), "ghost")
    client = logged_in(rita)

    assert client.get("/console/lockouts/").status_code == 403
    response = client.post(
        "/console/lockouts/unlock/", {"username": "ghost", "ip_address": "127.0.0.1"}
    )

    assert response.status_code == 403
    assert AccessAttempt.objects.filter(username="ghost").exists()


def test_an_unlock_without_a_csrf_token_is_refused(olga: Any) -> None:
    guess(Client(), "ghost")
    client = Client(enforce_csrf_checks=True)
    client.force_login(olga)

    response = client.post(
        "/console/lockouts/unlock/", {"username": "ghost", "ip_address": "127.0.0.1"}
    )

    assert response.status_code == 403
    assert AccessAttempt.objects.filter(username="ghost").exists()


def test_a_session_idle_for_eight_hours_is_not_accepted(rita: Any) -> None:
    client = Client()
    assert login(client, "rita", PASSWORD).status_code == 302
    # Eight idle hours and a second on from the login: the session's expiry has passed.
    Session.objects.update(expire_date=F("expire_date") - timedelta(hours=8, seconds=1))

    response = client.get("/console/approvals/")

    assert response.status_code == 302
    assert response["Location"].startswith("/console/login/")


def test_a_session_cookie_is_not_given_two_weeks(rita: Any) -> None:
    client = Client()
    login(client, "rita", PASSWORD)

    assert client.cookies["sessionid"]["max-age"] <= 8 * 3600


def test_a_reviewer_cannot_open_approvals_without_enrolling_when_required(
    rita: Any, settings: Any
) -> None:
    settings.TOOLOPS_REQUIRE_2FA = True
    client = Client()
    assert login(client, "rita", PASSWORD).status_code == 302

    response = client.get("/console/approvals/")

    assert response.status_code == 302
    assert response["Location"].startswith("/console/account/two-factor/")


def test_a_stolen_password_without_the_code_opens_nothing(rita: Any) -> None:
    TOTPDevice.objects.create(user=rita, name="console", confirmed=True)
    client = Client()
    login(client, "rita", PASSWORD)

    assert client.get("/console/approvals/").status_code == 302
    assert client.get("/admin/").status_code == 302
    assert "_auth_user_id" not in client.session


def test_a_wrong_totp_code_is_refused(rita: Any) -> None:
    device = TOTPDevice.objects.create(user=rita, name="console", confirmed=True)
    client = Client()
    login(client, "rita", PASSWORD)

    response = client.post("/console/login/code/", {"code": wrong_code(device)})

    assert response.status_code == 200
    assert "_auth_user_id" not in client.session


def test_guessing_totp_codes_locks_the_login(rita: Any, settings: Any) -> None:
    # Without django-otp's growing pause after each wrong code (test_two_factor.py shows
    # it), which would refuse these guesses before they are even checked.
    settings.OTP_TOTP_THROTTLE_FACTOR = 0
    device = TOTPDevice.objects.create(user=rita, name="console", confirmed=True)
    client = Client()
    login(client, "rita", PASSWORD)
    statuses = [
        client.post("/console/login/code/", {"code": wrong_code(device)}).status_code
        for _ in range(5)
    ]

    right = client.post("/console/login/code/", {"code": code_for(device)})

    assert statuses[-1] == 429
    assert right.status_code == 429
    assert "_auth_user_id" not in client.session


def test_guessing_totp_codes_at_request_speed_is_paused(rita: Any) -> None:
    device = TOTPDevice.objects.create(user=rita, name="console", confirmed=True)
    client = Client()
    login(client, "rita", PASSWORD)
    client.post("/console/login/code/", {"code": wrong_code(device)})

    response = client.post("/console/login/code/", {"code": code_for(device)})

    assert "Too many wrong codes" in response.text
    assert "_auth_user_id" not in client.session


def test_a_totp_code_cannot_be_replayed(rita: Any) -> None:
    device = TOTPDevice.objects.create(user=rita, name="console", confirmed=True)
    code = code_for(device)
    first = Client()
    login(first, "rita", PASSWORD)
    assert first.post("/console/login/code/", {"code": code}).status_code == 302

    second = Client(REMOTE_ADDR="10.0.0.9")
    login(second, "rita", PASSWORD)
    second.post("/console/login/code/", {"code": code})

    assert "_auth_user_id" not in second.session


def test_the_login_does_not_redirect_to_another_site(rita: Any) -> None:
    response = Client().post(
        "/console/login/?next=https://evil.example/",
        {"username": "rita", "password": PASSWORD, "next": "https://evil.example/"},
    )

    assert response["Location"] == "/console/approvals/"  # her own work, not another site


def test_the_lockout_page_escapes_the_username() -> None:
    client = Client()
    name = "<script>alert(1)</script>"
    guess(client, name)

    response = login(client, name, WRONG)

    assert response.status_code == 429
    assert name not in response.text
    assert "&lt;script&gt;" in response.text


def test_a_rotated_token_is_refused(db: None) -> None:
    _, old = agent_create(name="bot")
    assert api_status(old, "r-1") == 201
    out = io.StringIO()

    call_command("create_agent", "bot", "--rotate", stdout=out)
    new = out.getvalue().strip().splitlines()[-1]

    assert api_status(old, "r-2") == 401
    assert api_status(new, "r-3") == 201


def test_a_revoked_token_is_refused(db: None) -> None:
    _, token = agent_create(name="bot")
    assert api_status(token, "r-1") == 201

    call_command("revoke_agent", "bot", stdout=io.StringIO())

    assert api_status(token, "r-2") == 401
