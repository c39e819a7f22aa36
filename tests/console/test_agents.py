"""The agents page: operators see each agent's rate limit and the default a new agent
gets, and change a limit through a CSRF-protected form that refuses bad input."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.admin.models import LogEntry
from django.test import Client

from toolops.models import Agent
from toolops.services import agent_create

from .conftest import logged_in

pytestmark = pytest.mark.django_db


@pytest.fixture
def bot() -> Agent:
    return agent_create(name="bot", rate_limit_per_minute=120)[0]


def test_operators_see_each_agents_limit_and_the_default(
    operator_client: Client, bot: Agent, settings: Any
) -> None:
    settings.TOOLOPS_AGENT_RATE_LIMIT_PER_MINUTE = 450
    agent_create(name="free")
    page = operator_client.get("/console/agents/").content.decode()
    assert "bot" in page and "120" in page
    assert "free" in page and "no limit" in page
    assert "<strong>450</strong> requests a minute" in page
    assert 'href="/console/agents/"' in page  # in the console's nav


def test_others_may_not_see_or_change_limits(reviewer_client: Client, bot: Agent) -> None:
    assert reviewer_client.get("/console/agents/").status_code == 403
    url = f"/console/agents/{bot.pk}/rate-limit/"
    assert reviewer_client.post(url, {"rate_limit_per_minute": "0"}).status_code == 403
    assert Agent.objects.get(pk=bot.pk).rate_limit_per_minute == 120


def test_an_operator_changes_a_limit_and_it_is_audited(
    operator_client: Client, operator: Any, bot: Agent
) -> None:
    url = f"/console/agents/{bot.pk}/rate-limit/"
    answer = operator_client.post(url, {"rate_limit_per_minute": "30"}, follow=True)
    assert "bot now has 30 requests a minute" in answer.content.decode()
    assert Agent.objects.get(pk=bot.pk).rate_limit_per_minute == 30
    entry = LogEntry.objects.get(object_id=str(bot.pk), user=operator)
    assert "120 → 30" in entry.change_message

    operator_client.post(url, {"rate_limit_per_minute": ""})
    assert Agent.objects.get(pk=bot.pk).rate_limit_per_minute is None


@pytest.mark.parametrize(
    ("value", "error"),
    [
        ("-5", "cannot be negative"),
        ("ten", "Enter a whole number of requests per minute"),
        ("1.5", "Enter a whole number of requests per minute"),
        ("99999999999999999999", "At most 1,000,000"),
    ],
)
def test_bad_input_is_a_clear_form_error(
    operator_client: Client, bot: Agent, value: str, error: str
) -> None:
    answer = operator_client.post(f"/console/agents/{bot.pk}/rate-limit/",
                                  {"rate_limit_per_minute": value})  # fmt: skip
    assert answer.status_code == 200
    assert error in answer.content.decode()
    assert Agent.objects.get(pk=bot.pk).rate_limit_per_minute == 120


def test_a_change_needs_the_csrf_token(operator: Any, bot: Agent) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(operator)
    answer = client.post(f"/console/agents/{bot.pk}/rate-limit/", {"rate_limit_per_minute": "1"})
    assert answer.status_code == 403
    assert Agent.objects.get(pk=bot.pk).rate_limit_per_minute == 120


def test_an_unknown_agent_is_404(operator_client: Client) -> None:
    assert operator_client.get("/console/agents/999999/rate-limit/").status_code == 404


def test_superusers_may_change_limits(superuser: Any, bot: Agent) -> None:
    client = logged_in(superuser)
    client.post(f"/console/agents/{bot.pk}/rate-limit/", {"rate_limit_per_minute": "7"})
    assert Agent.objects.get(pk=bot.pk).rate_limit_per_minute == 7
