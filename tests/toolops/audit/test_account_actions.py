"""The account actions in the one audit log: a token rotated or revoked from the shell, a
login locked by repeated failures, and an operator's unlock — each exactly one entry,
none for an unlock that found nothing to clear."""

from __future__ import annotations

import io
from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client

from tests.console.conftest import PASSWORD, logged_in, make_user
from toolops.audit.models import AuditEntry
from toolops.services import agent_create

pytestmark = pytest.mark.django_db
Action = AuditEntry.Action


@pytest.fixture(autouse=True)
def fast_password_hashing(settings: Any) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def entries(action: str) -> list[AuditEntry]:
    return list(AuditEntry.objects.filter(action=action))


def command(name: str, *args: str) -> str:
    out = io.StringIO()
    call_command(name, *args, stdout=out)
    return out.getvalue()


def test_it_records_a_token_rotated_from_the_shell() -> None:
    agent_create(name="bot")

    out = command("create_agent", "bot", "--rotate")

    [entry] = entries(Action.TOKEN_ROTATE)
    assert entry.object_type == "agent" and entry.object_id == "bot"
    assert entry.actor is None
    assert "manage.py create_agent --rotate" in entry.detail["via"]
    token = out.strip().splitlines()[-1]
    assert token not in str(entry.detail) + entry.summary  # the hint only, never the token


def test_it_records_a_token_revoked_from_the_shell() -> None:
    agent_create(name="bot")

    command("revoke_agent", "bot")

    [entry] = entries(Action.TOKEN_REVOKE)
    assert entry.object_id == "bot" and entry.detail["was_active"] is True
    assert "manage.py revoke_agent" in entry.detail["via"]


def test_a_refused_rotate_writes_no_entry() -> None:
    with pytest.raises(Exception, match="No agent is named"):
        command("create_agent", "ghost", "--rotate")

    assert not entries(Action.TOKEN_ROTATE)


def test_it_records_a_lockout_once_and_the_operators_unlock(django_user_model: Any) -> None:
    make_user(django_user_model, "rita", "reviewers")
    olga = make_user(django_user_model, "olga", "operators")
    guesser = Client(REMOTE_ADDR="203.0.113.7")
    for _ in range(7):  # the two tries after the lock are refused, not new lockouts
        guesser.post("/console/login/", {"username": "rita", "password": "wrong"})

    [locked] = entries(Action.LOGIN_LOCKOUT)
    assert locked.object_id == "rita" and locked.detail["address"] == "203.0.113.7"
    assert locked.actor is None

    operator = logged_in(olga)
    operator.post("/console/lockouts/unlock/", {"username": "rita", "ip_address": "203.0.113.7"})
    operator.post(
        "/console/lockouts/unlock/", {"username": "rita", "ip_address": "203.0.113.7"}
    )  # nothing left to clear: no second entry

    [unlocked] = entries(Action.LOGIN_UNLOCK)
    assert unlocked.actor == olga and unlocked.object_id == "rita"
    assert unlocked.object_url == ""
    response = Client(REMOTE_ADDR="203.0.113.7").post(
        "/console/login/", {"username": "rita", "password": PASSWORD}
    )
    assert response.status_code == 302
