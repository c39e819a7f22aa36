"""The login lockout and a revoked token as a deployment serves them: a real uvicorn
process (ASGI, where axes' middleware takes its async path), and a command run beside it."""

from __future__ import annotations

import io
import re
from typing import Any

import httpx
from django.core.management import call_command

from tests.waiting import wait_until
from toolops.api.auth import AGENT_CACHE_S
from toolops.services import agent_create

from .conftest import PASSWORD, make_user


def post_login(client: httpx.Client, username: str, password: str) -> httpx.Response:
    page = client.get("/console/login/")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
    assert token, page.text
    return client.post(
        "/console/login/",
        data={"username": username, "password": password, "csrfmiddlewaretoken": token[1]},
    )


def test_it_locks_a_login_under_asgi(
    toolops_server: Any, django_user_model: Any, settings: Any
) -> None:
    # A hash the server knows (the tests' fast MD5 is not among its hashers), so the last
    # password below really is the right one.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]
    make_user(django_user_model, "rita", "reviewers")
    server = toolops_server()

    with httpx.Client(base_url=server.url, timeout=10) as client:
        statuses = [post_login(client, "rita", "wrong").status_code for _ in range(5)]
        locked = post_login(client, "rita", PASSWORD)

    assert statuses == [200, 200, 200, 200, 429]
    assert locked.status_code == 429
    assert "is locked for" in locked.text and "rita" in locked.text
    assert int(locked.headers["Retry-After"]) > 0


def test_a_revoked_token_is_refused_by_a_running_server_within_its_cache_time(
    toolops_server: Any,
) -> None:
    _, token = agent_create(name="bot")
    server = toolops_server()
    headers = {"Authorization": f"Bearer {token}"}
    assert httpx.get(f"{server.url}/api/v1/tools", headers=headers).status_code == 200

    call_command("revoke_agent", "bot", stdout=io.StringIO())

    # The server's token cache lets the old token through for at most AGENT_CACHE_S.
    wait_until(
        lambda: httpx.get(f"{server.url}/api/v1/tools", headers=headers).status_code == 401,
        AGENT_CACHE_S + 5,
        every=0.2,
        failure="the revoked token was still accepted",
    )
