"""The agent's side of the policy against a real ToolOps server: MCP's tools/list offers
only the granted tools, and `toolops_policy` answers what GET /api/v1/policy does; the
Python client's policy() and every adapter's tool list (all from GET /tools) are
filtered the same way."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from mcp.shared.exceptions import MCPError

from tests.conftest import Shop
from tests.toolops.policy.helpers import apply_policy
from tests.toolops.test_mcp import mcp_client, text
from toolops.adapters.agents import agents_tools
from toolops.adapters.anthropic import anthropic_tools
from toolops.adapters.langchain import langchain_tools
from toolops.adapters.openai import openai_tools, responses_tools
from toolops.api.policy import agent_policy
from toolops.client import AsyncToolOps, ToolOps

ONE_GRANT = """
default = "deny"
[[grant]]
agents = ["agent-a"]
tools = ["query_stock"]
[[limit]]
name = "stock looks per day"
agents = ["agent-a"]
tools = ["*"]
max = 50
per = "day"
"""


def test_mcp_lists_the_granted_tools_and_answers_the_agents_policy(
    toolops_server: Any, agent_a: tuple[Any, str], shop: Shop
) -> None:
    server = toolops_server()

    async def listed() -> list[str]:
        async with mcp_client(server.url, agent_a[1]) as client:
            return [t.name for t in (await client.list_tools()).tools]

    # The server's catalog (this process may hold Python tools other tests registered).
    everything = asyncio.run(listed())
    assert everything[0] == "toolops_policy"
    assert {"query_stock", "reserve_stock", "charge"} <= set(everything)

    version = apply_policy(ONE_GRANT)

    async def scenario() -> tuple[Any, ...]:
        async with mcp_client(server.url, agent_a[1]) as client:
            tools = (await client.list_tools()).tools
            read = await client.call_tool("query_stock", {"sku": "A12"})
            answer = await client.call_tool("toolops_policy", {})
            refused = await client.call_tool("reserve_stock", {"sku": "A12", "qty": 1})
            with pytest.raises(MCPError, match="toolops_policy takes no arguments"):
                await client.call_tool("toolops_policy", {"agent": "agent-b"})
            return tools, read, answer, refused

    tools, read, answer, refused = asyncio.run(scenario())
    assert [t.name for t in tools] == ["toolops_policy", "query_stock"]
    [own] = [t for t in tools if t.name == "toolops_policy"]
    assert own.annotations.read_only_hint is True and own.input_schema["properties"] == {}

    assert not answer.is_error
    expected = agent_policy(agent_a[0])
    assert answer.structured_content == expected == json.loads(text(answer))
    assert expected["version"] == version.number and expected["tools"] == ["query_stock"]
    # The read made in this session is counted; the policy's own answer is not a call.
    assert [(lim["name"], lim["spent"]) for lim in expected["limits"]] == [
        ("stock looks per day", 1)
    ]

    assert read.is_error is False
    assert refused.is_error and "reserve_stock" in text(refused)
    assert not shop.requests("/inventory/reservations")


def test_the_client_and_the_adapters_see_only_the_granted_tools(
    toolops_server: Any, agent_a: tuple[Any, str], shop: Shop
) -> None:
    server = toolops_server()
    client = ToolOps(server.url, agent_a[1])
    before = client.policy()
    assert before["version"] is None and before["limits"] == []
    # Every public tool of the server's catalog, as GET /tools lists them.
    assert before["tools"] == [t["name"] for t in client.tools()]
    assert {"query_stock", "reserve_stock", "charge"} <= set(before["tools"])
    version = apply_policy(ONE_GRANT)

    policy = client.policy()
    assert policy["version"] == version.number and policy["tools"] == ["query_stock"]
    [limit] = policy["limits"]
    assert (limit["tools"], limit["spent"], limit["max"]) == (["query_stock"], 0, 50)

    assert [t["name"] for t in client.tools()] == ["query_stock"]
    assert [t["function"]["name"] for t in openai_tools(client)] == ["query_stock"]
    assert [t["name"] for t in responses_tools(client)] == ["query_stock"]
    assert [t["name"] for t in anthropic_tools(client)] == ["query_stock"]
    assert [t.name for t in langchain_tools(client.open_run())] == ["query_stock"]

    async def in_asyncio() -> tuple[dict[str, Any], list[str]]:
        async with AsyncToolOps(server.url, agent_a[1]) as aclient:
            tools = await agents_tools(await aclient.open_run())
            return await aclient.policy(), [t.name for t in tools.tools]

    apolicy, agents = asyncio.run(in_asyncio())
    assert apolicy == policy
    assert agents == ["query_stock"]
    client.close()
