"""/console/agents/: each agent's state, token start and last use."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from django.test import Client

from toolops.models import Agent

pytestmark = pytest.mark.django_db


def test_it_shows_each_agents_last_use(
    reviewer_client: Client, agent_a: tuple[Agent, str], agent_b: tuple[Agent, str]
) -> None:
    Agent.objects.filter(pk=agent_a[0].pk).update(
        last_used_at=datetime(2026, 3, 4, 5, 6, tzinfo=UTC)
    )
    Agent.objects.filter(pk=agent_b[0].pk).update(is_active=False)

    response = reviewer_client.get("/console/agents/")

    assert response.status_code == 200
    rows = response.text.split('<tr id="agent-')[1:]
    assert "agent-a" in rows[0] and "2026-03-04 05:06" in rows[0] and "active" in rows[0]
    assert "agent-b" in rows[1] and "never" in rows[1] and "revoked" in rows[1]
    assert agent_a[1] not in response.text  # never the token itself
    assert agent_a[0].token_hint in rows[0]


def test_it_shows_an_api_use_after_it_happens(
    reviewer_client: Client, api: Any, agent_a: tuple[Agent, str]
) -> None:
    assert "never" in reviewer_client.get("/console/agents/").text

    api.get("/api/v1/tools")

    assert "never" not in reviewer_client.get("/console/agents/").text


def test_it_needs_a_console_user(outsider: Any) -> None:
    client = Client()
    assert client.get("/console/agents/").status_code == 302
    client.force_login(outsider)
    assert client.get("/console/agents/").status_code == 403
