"""TOTP two-factor (django-otp): enrolment in the console, the login's code step, and
TOOLOPS_REQUIRE_2FA, which sends reviewers and superusers to enrol before anything else."""

from __future__ import annotations

import time
from typing import Any

import pytest
from django.test import Client
from django_otp.oath import TOTP
from django_otp.plugins.otp_totp.models import TOTPDevice

from .conftest import PASSWORD, logged_in

pytestmark = pytest.mark.django_db


def code_for(device: TOTPDevice, steps_ahead: int = 0) -> str:
    totp = TOTP(device.bin_key, device.step, device.t0, device.digits, device.drift)
    totp.time = time.time() + steps_ahead * device.step
    return f"{totp.token():06d}"


def wrong_code(device: TOTPDevice) -> str:
    right = {code_for(device, n) for n in (-1, 0, 1)}
    return next(c for c in ("000000", "111111", "222222", "333333") if c not in right)


@pytest.fixture
def rita_device(reviewer: Any) -> TOTPDevice:
    return TOTPDevice.objects.create(user=reviewer, name="console", confirmed=True)


def password_step(client: Client, username: str = "rita") -> Any:
    return client.post("/console/login/", {"username": username, "password": PASSWORD})


def test_it_enrols_a_device_with_a_code(reviewer_client: Client, reviewer: Any) -> None:
    page = reviewer_client.get("/console/account/two-factor/")

    device = TOTPDevice.objects.get(user=reviewer)
    assert not device.confirmed
    assert page.context["secret"].replace(" ", "") in device.config_url
    assert "otpauth://totp/ToolOps%3Arita?" in page.text

    response = reviewer_client.post("/console/account/two-factor/", {"code": code_for(device)})

    assert response.status_code == 302
    device.refresh_from_db()
    assert device.confirmed
    assert "Two-factor is on" in reviewer_client.get("/console/account/two-factor/").text


def test_it_refuses_a_wrong_code_at_enrolment(reviewer_client: Client, reviewer: Any) -> None:
    reviewer_client.get("/console/account/two-factor/")
    device = TOTPDevice.objects.get(user=reviewer)

    response = reviewer_client.post("/console/account/two-factor/", {"code": wrong_code(device)})

    assert response.status_code == 200
    assert "That code is not right" in response.text
    device.refresh_from_db()
    assert not device.confirmed


def test_a_password_alone_does_not_log_in_a_user_with_a_device(rita_device: TOTPDevice) -> None:
    client = Client()

    response = password_step(client)

    assert response["Location"] == "/console/login/code/"
    assert "_auth_user_id" not in client.session
    assert client.get("/console/").status_code == 302  # still the login page
    assert "Enter your code" in client.get("/console/login/code/").text


def test_the_right_code_logs_in(rita_device: TOTPDevice) -> None:
    client = Client()
    password_step(client)

    response = client.post("/console/login/code/", {"code": code_for(rita_device)})

    assert response.status_code == 302
    assert response["Location"] == "/console/approvals/"  # a reviewer lands on her queue
    assert client.get("/console/").status_code == 200
    assert client.session["otp_device_id"] == rita_device.persistent_id


def test_a_wrong_code_is_refused(rita_device: TOTPDevice) -> None:
    client = Client()
    password_step(client)

    response = client.post("/console/login/code/", {"code": wrong_code(rita_device)})

    assert response.status_code == 200
    assert "That code is not right" in response.text
    assert "_auth_user_id" not in client.session


def test_it_pauses_after_a_wrong_code(rita_device: TOTPDevice) -> None:
    client = Client()
    password_step(client)
    client.post("/console/login/code/", {"code": wrong_code(rita_device)})

    # Within the pause even the right code is not checked (nor counted as a failure).
    response = client.post("/console/login/code/", {"code": code_for(rita_device)})

    assert "Too many wrong codes: wait" in response.text
    assert "_auth_user_id" not in client.session


def test_a_code_is_good_once(rita_device: TOTPDevice) -> None:
    code = code_for(rita_device)
    first = Client()
    password_step(first)
    first.post("/console/login/code/", {"code": code})
    second = Client(REMOTE_ADDR="10.0.0.5")
    password_step(second)

    response = second.post("/console/login/code/", {"code": code})

    assert response.status_code == 200
    assert "_auth_user_id" not in second.session


def test_the_code_step_needs_the_password_step_first(rita_device: TOTPDevice) -> None:
    client = Client()

    response = client.post("/console/login/code/", {"code": code_for(rita_device)})

    assert response["Location"] == "/console/login/"
    assert "_auth_user_id" not in client.session


def test_it_goes_back_to_the_next_page_after_the_code(rita_device: TOTPDevice) -> None:
    client = Client()
    client.post(
        "/console/login/?next=/console/approvals/",
        {"username": "rita", "password": PASSWORD, "next": "/console/approvals/"},
    )

    response = client.post("/console/login/code/", {"code": code_for(rita_device)})

    assert response["Location"] == "/console/approvals/"


class TestRequired:
    @pytest.fixture(autouse=True)
    def required(self, settings: Any) -> None:
        settings.TOOLOPS_REQUIRE_2FA = True

    def test_a_reviewer_cannot_open_approvals_before_enrolling(
        self, reviewer_client: Client, reviewer: Any
    ) -> None:
        response = reviewer_client.get("/console/approvals/")

        assert response.status_code == 302
        assert response["Location"] == "/console/account/two-factor/?next=%2Fconsole%2Fapprovals%2F"
        page = reviewer_client.get(response["Location"])
        assert "must use two-factor" in page.text

        device = TOTPDevice.objects.get(user=reviewer)
        done = reviewer_client.post(
            "/console/account/two-factor/",
            {"code": code_for(device), "next": "/console/approvals/"},
        )
        assert done["Location"] == "/console/approvals/"
        assert reviewer_client.get("/console/approvals/").status_code == 200

    def test_a_superuser_cannot_open_the_admin_before_enrolling(self, superuser: Any) -> None:
        client = logged_in(superuser)

        response = client.get("/admin/")

        assert response.status_code == 302
        assert response["Location"].startswith("/console/account/two-factor/")

    def test_a_session_opened_without_the_code_must_verify(
        self, reviewer_client: Client, rita_device: TOTPDevice
    ) -> None:
        assert reviewer_client.get("/console/").status_code == 302

        reviewer_client.post("/console/account/two-factor/", {"code": code_for(rita_device)})

        assert reviewer_client.get("/console/").status_code == 200

    def test_an_operator_is_not_asked(self, operator_client: Client) -> None:
        assert operator_client.get("/console/").status_code == 200

    def test_logging_out_stays_open(self, reviewer_client: Client) -> None:
        assert reviewer_client.post("/console/logout/").status_code == 302
        assert reviewer_client.get("/console/").status_code == 302


def test_it_is_not_required_by_default(reviewer_client: Client) -> None:
    assert reviewer_client.get("/console/approvals/").status_code == 200
