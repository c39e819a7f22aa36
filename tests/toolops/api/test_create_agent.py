"""`manage.py create_agent NAME`: an agent whose token is printed once, stored hashed."""

from __future__ import annotations

import hashlib
import io
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from rest_framework.test import APIClient

from toolops.models import Agent, Run

pytestmark = pytest.mark.django_db


def create_agent(*args: str) -> str:
    out = io.StringIO()
    call_command("create_agent", *args, stdout=out)
    return out.getvalue()


def last_line(output: str) -> str:
    return output.strip().splitlines()[-1].strip()


def test_it_prints_the_token_last(db: None) -> None:
    output = create_agent("bot")

    token = last_line(output)
    agent = Agent.objects.get(name="bot")
    assert token
    assert " " not in token
    assert agent.token_hash == hashlib.sha256(token.encode()).hexdigest()


def test_it_stores_only_the_hash(db: None) -> None:
    token = last_line(create_agent("bot"))

    agent = Agent.objects.get(name="bot")
    assert agent.token_hash != token
    stored = " ".join(str(getattr(agent, f.attname)) for f in Agent._meta.concrete_fields)
    assert token not in stored


def test_it_prints_a_token_that_authenticates(db: None) -> None:
    token = last_line(create_agent("bot"))
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")

    response = client.post("/api/v1/runs", {"run_id": "r-1"}, format="json")

    assert response.status_code == 201, response.content
    assert Run.objects.get(run_id="r-1").agent.name == "bot"


def test_it_gives_each_agent_its_own_token(db: None) -> None:
    first = last_line(create_agent("bot-1"))
    second = last_line(create_agent("bot-2"))

    assert first != second


def test_it_refuses_a_duplicate_name(db: None) -> None:
    create_agent("bot")
    before = Agent.objects.get(name="bot").token_hash

    with pytest.raises(CommandError):
        create_agent("bot")

    assert Agent.objects.count() == 1
    assert Agent.objects.get(name="bot").token_hash == before


@pytest.mark.parametrize("name", ["", "   ", "x" * 129])
def test_it_refuses_a_bad_name(db: None, name: str) -> None:
    with pytest.raises(CommandError):
        create_agent(name)

    assert not Agent.objects.exists()


def test_it_sets_a_rate_limit(db: None) -> None:
    create_agent("bot", "--rate-limit", "30")

    assert Agent.objects.get(name="bot").rate_limit_per_minute == 30


def test_a_new_agent_gets_the_default_rate_limit(db: None, settings: Any) -> None:
    settings.TOOLOPS_AGENT_RATE_LIMIT_PER_MINUTE = 240
    output = create_agent("bot")
    assert "240 requests a minute" in output
    assert Agent.objects.get(name="bot").rate_limit_per_minute == 240


def test_rate_limit_0_means_no_limit(db: None) -> None:
    create_agent("bot", "--rate-limit", "0")
    assert Agent.objects.get(name="bot").rate_limit_per_minute is None


def test_a_negative_rate_limit_is_refused(db: None) -> None:
    with pytest.raises(CommandError, match="0 \\(no limit\\) or more"):
        create_agent("bot", "--rate-limit", "-1")
    assert not Agent.objects.exists()
