"""GET /api/v1/policy (API.md "Agent policy"): the agent's own view — the version in
force, the tools it may call, and each limit that applies to it with spent, max and
resets_at; never another agent's grants or limits."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from rest_framework.test import APIClient

from tests.conftest import Shop
from tests.toolops.api.helpers import assert_problem, body, create_run, post_call
from tests.toolops.policy.helpers import apply_policy
from toolops.models import Agent
from toolops.tools import registry

pytestmark = pytest.mark.django_db

# A Tuesday in March: Paris is at UTC+1 (summer time starts on the 29th).
NOW = datetime(2026, 3, 10, 15, 0, tzinfo=UTC)

LIMITS = """
[[limit]]
name = "reservations per day"
agents = ["*"]
tools = ["reserve_stock"]
max = 5
per = "day"

[[limit]]
name = "charges per day"
agents = ["agent-a"]
tools = ["charge"]
sum = "amount"
max = "500"
per = "day"
time_zone = "Europe/Paris"

[[limit]]
name = "agent b's vouchers"
agents = ["agent-b"]
tools = ["send_voucher"]
max = 1
per = "total"

[[rule]]
name = "charges run without a reviewer"
agents = ["*"]
tools = ["charge"]
when = 'true'
action = "no_approval"
"""


@pytest.fixture(autouse=True)
def clock(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("toolops.policy.limits.clock", lambda: NOW)


@pytest.fixture
def api_b(agent_b: tuple[Agent, str]) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {agent_b[1]}")
    return client


def policy(client: APIClient) -> dict[str, Any]:
    response = client.get("/api/v1/policy")
    assert response.status_code == 200, response.content
    return body(response)


def call(client: APIClient, step: int, tool: str, **args: Any) -> dict[str, Any]:
    response = post_call(client, "r-1", step_index=step, tool=tool, args=args)
    assert response.status_code in (200, 202), response.content
    return body(response)


def by_name(limits: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for limit in limits:
        out.setdefault(limit["name"], []).append(limit)
    return out


def test_without_a_policy_every_public_tool_and_no_limits(api: APIClient, shop: Shop) -> None:
    data = policy(api)
    assert data == {
        "version": None,
        "tools": [spec.name for spec in registry.public_tools()],
        "limits": [],
    }
    assert "charge" in data["tools"] and "refund" not in data["tools"]  # internal


def test_limits_with_spent_max_and_resets_at_after_some_calls(
    api: APIClient, agent_b: Any, shop: Shop
) -> None:
    version = apply_policy(LIMITS)
    create_run(api, "r-1")
    before = by_name(policy(api)["limits"])
    assert before["charges per day"] == [
        {
            "name": "charges per day",
            "tools": ["charge"],
            "sum": "amount",
            "spent": "0.00",
            "max": "500.00",
            "per": "day",
            "time_zone": "Europe/Paris",
            "resets_at": "2026-03-10T23:00:00Z",
            "currency": None,
        }
    ]

    assert call(api, 0, "reserve_stock", sku="A12", qty=1)["status"] == "succeeded"
    assert call(api, 1, "reserve_stock", sku="A12", qty=1)["status"] == "succeeded"
    for step, (amount, currency) in enumerate([("480.00", "eur"), ("30.5", "USD")], 2):
        charged = call(api, step, "charge", order_id=f"o-{step}", amount=amount, currency=currency)
        assert charged["status"] == "succeeded", charged

    data = policy(api)
    assert data["version"] == version.number
    limits = by_name(data["limits"])
    assert limits["reservations per day"] == [
        {
            "name": "reservations per day",
            "tools": ["reserve_stock"],
            "sum": None,
            "spent": 2,
            "max": 5,
            "per": "day",
            "time_zone": "UTC",
            "resets_at": "2026-03-11T00:00:00Z",
        }
    ]
    # One entry per currency spent: euros and dollars are never added together.
    charges = limits["charges per day"]
    assert [(c["currency"], c["spent"], c["max"]) for c in charges] == [
        ("EUR", "480.00", "500.00"),
        ("USD", "30.50", "500.00"),
    ]
    assert all(c["resets_at"] == "2026-03-10T23:00:00Z" for c in charges)


def test_a_failed_call_is_not_counted(api: APIClient, agent_b: Any, shop: Shop) -> None:
    apply_policy(LIMITS)
    create_run(api, "r-1")
    shop.fault("/inventory/reservations", fail_next=1, fail_status=409)
    assert call(api, 0, "reserve_stock", sku="A12", qty=1)["status"] == "failed"
    [reservations] = by_name(policy(api)["limits"])["reservations per day"]
    assert reservations["spent"] == 0


def test_another_agents_limits_and_spending_are_never_shown(
    api: APIClient, api_b: APIClient, shop: Shop
) -> None:
    apply_policy(LIMITS)
    create_run(api_b, "r-1")
    assert call(api_b, 0, "reserve_stock", sku="A12", qty=1)["status"] == "succeeded"

    mine = by_name(policy(api)["limits"])
    assert set(mine) == {"reservations per day", "charges per day"}
    assert mine["reservations per day"][0]["spent"] == 0  # agent-b's call is its own

    theirs = by_name(policy(api_b)["limits"])
    assert set(theirs) == {"reservations per day", "agent b's vouchers"}
    assert theirs["reservations per day"][0]["spent"] == 1
    assert theirs["agent b's vouchers"][0]["resets_at"] is None  # per = "total"


def test_only_the_agents_own_grants(api: APIClient, api_b: APIClient, shop: Shop) -> None:
    apply_policy(
        """
        default = "deny"
        [[grant]]
        agents = ["agent-a"]
        tools = ["query_stock", "charge"]
        [[grant]]
        agents = ["agent-b"]
        tools = ["send_voucher"]
        """
    )
    assert policy(api)["tools"] == ["charge", "query_stock"]
    assert policy(api_b)["tools"] == ["send_voucher"]


def test_a_wildcard_limit_lists_the_tools_the_agent_may_call(api: APIClient, shop: Shop) -> None:
    apply_policy(
        """
        default = "deny"
        [[grant]]
        agents = ["agent-a"]
        tools = ["query_stock", "reserve_stock"]
        [[limit]]
        name = "calls per week"
        agents = ["*"]
        tools = ["*"]
        max = 100
        per = "week"
        [[limit]]
        name = "stock and charges"
        agents = ["agent-a"]
        tools = ["charge", "reserve_stock"]
        max = 3
        per = "month"
        time_zone = "America/New_York"
        [[limit]]
        name = "charges only"
        agents = ["*"]
        tools = ["charge"]
        max = 3
        per = "day"
        """
    )
    limits = by_name(policy(api)["limits"])
    # A limit that leaves the agent no tool it may call is not shown.
    assert set(limits) == {"calls per week", "stock and charges"}
    [week] = limits["calls per week"]
    assert week["tools"] == ["query_stock", "reserve_stock"]
    assert week["resets_at"] == "2026-03-16T00:00:00Z"  # the next Monday
    [month] = limits["stock and charges"]
    assert month["tools"] == ["reserve_stock"]
    assert month["resets_at"] == "2026-04-01T04:00:00Z"  # midnight in New York (EDT)


def test_it_needs_the_agents_token(db: None) -> None:
    assert_problem(APIClient().get("/api/v1/policy"), 401)


def test_the_schema_describes_it(db: None) -> None:
    schema = body(APIClient().get("/api/v1/schema/?format=json"))
    answer = schema["paths"]["/api/v1/policy"]["get"]["responses"]["200"]
    ref = answer["content"]["application/json"]["schema"]["$ref"]
    component = schema["components"]["schemas"][ref.rsplit("/", 1)[-1]]
    assert set(component["properties"]) == {"version", "tools", "limits"}
    limit_ref = component["properties"]["limits"]["items"]["$ref"]
    limit = schema["components"]["schemas"][limit_ref.rsplit("/", 1)[-1]]
    assert {"name", "tools", "sum", "spent", "max", "per", "time_zone", "resets_at"} <= set(
        limit["required"]
    )
    assert "currency" in limit["properties"] and "currency" not in limit["required"]
