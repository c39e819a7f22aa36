"""The agents page: operators see each agent's state, token start, last use and rate
limit, and the default a new agent gets, and change a limit through a CSRF-protected form
that refuses bad input."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from django.test import Client

from toolops.audit.models import AuditEntry
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
    entry = AuditEntry.objects.get(action=AuditEntry.Action.AGENT_RATE_LIMIT, actor=operator)
    assert entry.object_id == "bot" and "120 → 30" in entry.summary

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
    answer = operator_client.post(
        f"/console/agents/{bot.pk}/rate-limit/", {"rate_limit_per_minute": value}
    )
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


def test_it_shows_each_agents_state_and_last_use(
    operator_client: Client, agent_a: tuple[Agent, str], agent_b: tuple[Agent, str]
) -> None:
    Agent.objects.filter(pk=agent_a[0].pk).update(
        last_used_at=datetime(2026, 3, 4, 5, 6, tzinfo=UTC)
    )
    Agent.objects.filter(pk=agent_b[0].pk).update(is_active=False)

    response = operator_client.get("/console/agents/")

    rows = response.content.decode().split('<tr id="agent-')[1:]
    assert "agent-a" in rows[0] and "2026-03-04 05:06" in rows[0] and "active" in rows[0]
    assert "agent-b" in rows[1] and "never" in rows[1] and "revoked" in rows[1]
    assert agent_a[1] not in response.content.decode()  # never the token itself
    assert agent_a[0].token_hint in rows[0]


def test_it_shows_an_api_use_after_it_happens(
    operator_client: Client, api: Any, agent_a: tuple[Agent, str]
) -> None:
    assert "never" in operator_client.get("/console/agents/").content.decode()

    api.get("/api/v1/tools")

    assert "never" not in operator_client.get("/console/agents/").content.decode()


def test_it_needs_a_console_user(outsider: Any) -> None:
    client = Client()
    assert client.get("/console/agents/").status_code == 302
    client.force_login(outsider)
    assert client.get("/console/agents/").status_code == 403
