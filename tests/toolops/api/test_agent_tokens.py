"""Agents' tokens: `create_agent NAME --rotate`, `revoke_agent NAME`, and the last use of
a token kept on the agent (written at most once a minute)."""

from __future__ import annotations

import io
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.test import APIClient

from toolops.api import auth
from toolops.models import Agent

from .test_create_agent import create_agent, last_line

pytestmark = pytest.mark.django_db


def status_with(token: str, run_id: str = "r-1") -> int:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client.post("/api/v1/runs", {"run_id": run_id}, format="json").status_code


def command(name: str, *args: str) -> str:
    out = io.StringIO()
    call_command(name, *args, stdout=out)
    return out.getvalue()


def test_rotate_prints_a_new_token_last_and_the_old_one_stops_working() -> None:
    old = last_line(create_agent("bot"))
    assert status_with(old, "r-1") == 201  # cached by this process now

    new = last_line(command("create_agent", "bot", "--rotate"))

    assert new != old and new.startswith("tops_")
    assert status_with(old, "r-2") == 401
    assert status_with(new, "r-3") == 201
    assert Agent.objects.count() == 1


def test_rotate_needs_an_existing_agent() -> None:
    with pytest.raises(CommandError, match="No agent is named 'ghost'"):
        command("create_agent", "ghost", "--rotate")

    assert not Agent.objects.exists()


def test_revoke_makes_the_token_answer_401() -> None:
    token = last_line(create_agent("bot"))
    assert status_with(token, "r-1") == 201

    output = command("revoke_agent", "bot")

    assert "Revoked" in output
    assert status_with(token, "r-2") == 401
    agent = Agent.objects.get(name="bot")
    assert not agent.is_active


def test_reactivating_a_revoked_agent_does_not_bring_its_token_back() -> None:
    token = last_line(create_agent("bot"))
    command("revoke_agent", "bot")

    Agent.objects.filter(name="bot").update(is_active=True)

    assert status_with(token) == 401


def test_rotate_gives_a_revoked_agent_a_working_token() -> None:
    create_agent("bot")
    command("revoke_agent", "bot")

    token = last_line(command("create_agent", "bot", "--rotate"))

    assert status_with(token) == 201


def test_revoke_needs_an_existing_agent() -> None:
    with pytest.raises(CommandError):
        command("revoke_agent", "ghost")


def test_it_keeps_the_last_use() -> None:
    token = last_line(create_agent("bot"))
    assert Agent.objects.get().last_used_at is None

    status_with(token)

    used = Agent.objects.get().last_used_at
    assert used is not None and timezone.now() - used < timedelta(seconds=5)


def test_it_writes_the_last_use_at_most_once_a_minute() -> None:
    token = last_line(create_agent("bot"))
    status_with(token, "r-1")
    first = Agent.objects.get().last_used_at

    with CaptureQueriesContext(connection) as queries:
        status_with(token, "r-2")

    assert Agent.objects.get().last_used_at == first
    assert not [q for q in queries if "last_used_at" in q["sql"]]


def test_another_process_writing_within_the_minute_is_not_written_again() -> None:
    token = last_line(create_agent("bot"))
    recent = timezone.now() - timedelta(seconds=10)
    Agent.objects.update(last_used_at=recent)
    auth._last_used_due.clear()  # as a fresh process would start

    status_with(token)

    assert Agent.objects.get().last_used_at == recent
