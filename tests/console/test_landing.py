"""Each role lands on its work: after a login that names no page (or only the console's
front door), reviewers land on the approval queue, support on the tickets desk,
operators and superusers on Runs. A `next` that names a page still wins."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django_otp.plugins.otp_totp.models import TOTPDevice

from .conftest import PASSWORD, make_user
from .test_two_factor import code_for

pytestmark = pytest.mark.django_db


def log_in(username: str, next_url: str | None = None) -> Any:
    path = "/console/login/" + (f"?next={next_url}" if next_url is not None else "")
    data = {"username": username, "password": PASSWORD}
    if next_url is not None:
        data["next"] = next_url
    return Client().post(path, data)


@pytest.mark.parametrize(
    ("groups", "landing"),
    [
        (("reviewers",), "/console/approvals/"),
        (("support",), "/console/tickets/"),
        (("operators",), "/console/"),
        (("reviewers", "operators"), "/console/"),
        (("reviewers", "support"), "/console/approvals/"),
    ],
)
@pytest.mark.parametrize("next_url", [None, "", "/console/"])
def test_each_role_lands_on_its_work(
    django_user_model: Any, groups: tuple[str, ...], landing: str, next_url: str | None
) -> None:
    make_user(django_user_model, "pat", *groups)

    response = log_in("pat", next_url)

    assert response.status_code == 302
    assert response["Location"] == landing


def test_a_superuser_lands_on_runs(superuser: Any) -> None:
    assert log_in("admin")["Location"] == "/console/"


def test_a_next_that_names_a_page_still_wins(reviewer: Any) -> None:
    response = log_in("rita", "/console/health/")

    assert response["Location"] == "/console/health/"


def test_the_landing_follows_the_code_step_too(support: Any) -> None:
    device = TOTPDevice.objects.create(user=support, name="console", confirmed=True)
    client = Client()
    client.post("/console/login/", {"username": "sam", "password": PASSWORD})

    response = client.post("/console/login/code/", {"code": code_for(device)})

    assert response["Location"] == "/console/tickets/"
