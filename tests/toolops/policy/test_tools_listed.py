"""GET /api/v1/tools under the agent policy (API.md "Agent policy"): in every format, only
the tools the agent may call — so a model is never offered a tool it would be refused."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from tests.conftest import Shop
from tests.toolops.api.helpers import body, create_run, post_call
from tests.toolops.policy.helpers import apply_policy
from toolops.models import Agent
from toolops.tools import registry

pytestmark = pytest.mark.django_db

DENY = """
default = "deny"
[[grant]]
agents = ["agent-a"]
tools = ["query_stock", "charge"]
[[grant]]
agents = ["agent-b"]
tools = ["send_voucher"]
"""


def names(client: APIClient, query: str = "") -> list[str]:
    response = client.get(f"/api/v1/tools{query}")
    assert response.status_code == 200, response.content
    tools = body(response)["tools"]
    if query == "?format=openai":
        return [t["function"]["name"] for t in tools]
    return [t["name"] for t in tools]


@pytest.fixture
def api_b(agent_b: tuple[Agent, str]) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {agent_b[1]}")
    return client


@pytest.mark.parametrize("query", ["", "?format=openai", "?format=anthropic"])
def test_only_the_granted_tools_are_listed(
    api: APIClient, api_b: APIClient, shop: Shop, query: str
) -> None:
    everything = [spec.name for spec in registry.public_tools()]
    assert names(api, query) == everything  # no policy yet

    apply_policy(DENY)
    assert names(api, query) == ["charge", "query_stock"]
    assert names(api_b, query) == ["send_voucher"]


def test_a_listed_tool_keeps_its_shape(api: APIClient, api_b: APIClient, shop: Shop) -> None:
    apply_policy(DENY)
    [tool] = [t for t in body(api.get("/api/v1/tools"))["tools"] if t["name"] == "charge"]
    assert tool["kind"] == "irreversible" and tool["requires_approval"] is True
    assert tool["params_schema"]["required"] == ["order_id", "amount"]
    [openai] = [
        t
        for t in body(api.get("/api/v1/tools?format=openai"))["tools"]
        if t["function"]["name"] == "charge"
    ]
    assert openai["type"] == "function"
    assert openai["function"]["parameters"] == tool["params_schema"]


def test_default_allow_lists_everything_and_rules_do_not_hide_tools(
    api: APIClient, shop: Shop
) -> None:
    apply_policy(
        """
        [[rule]]
        name = "no big charges"
        agents = ["*"]
        tools = ["charge"]
        when = 'context.args.amount.greaterThan(decimal("1000.00"))'
        action = "refuse"
        """
    )
    assert names(api) == [spec.name for spec in registry.public_tools()]


def test_a_tool_not_listed_is_refused_when_called(
    api: APIClient, api_b: APIClient, shop: Shop
) -> None:
    apply_policy(DENY)
    assert "reserve_stock" not in names(api)
    create_run(api, "r-1")
    response = post_call(
        api, "r-1", step_index=0, tool="reserve_stock", args={"sku": "A12", "qty": 1}
    )
    data = body(response)
    assert data["status"] == "failed" and data["error"]["reason"] == "not_permitted"
    assert not shop.requests("/inventory/reservations")
