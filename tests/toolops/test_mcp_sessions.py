"""MCP sessions are capped per agent (TOOLOPS_MCP_AGENT_MAX_SESSIONS): an agent at its
cap gets a clear 429 for another, while other agents still open theirs; an ended session
gives its place back."""

from __future__ import annotations

from typing import Any

import httpx

from tests.conftest import Shop

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"},
    },
}


def open_session(url: str, token: str) -> httpx.Response:
    """An initialize request: a new session when admitted (its id in Mcp-Session-Id)."""
    return httpx.post(
        f"{url}/mcp/",
        json=INITIALIZE,
        timeout=20,
        headers={
            "Authorization": f"Bearer {token}",
            "accept": "application/json, text/event-stream",
        },
    )


def test_an_agent_at_its_session_cap_gets_a_clear_429_and_an_ended_one_frees_a_place(
    toolops_server: Any, agent_a: tuple[Any, str], agent_b: tuple[Any, str], shop: Shop
) -> None:
    server = toolops_server(TOOLOPS_MCP_AGENT_MAX_SESSIONS="2")
    opened = [open_session(server.url, agent_a[1]) for _ in range(2)]
    assert [r.status_code for r in opened] == [200, 200]

    refused = open_session(server.url, agent_a[1])
    assert refused.status_code == 429
    assert refused.headers["content-type"] == "application/problem+json"
    assert refused.headers["retry-after"]
    detail = refused.json()["detail"]
    assert "2 MCP sessions open" in detail and "TOOLOPS_MCP_AGENT_MAX_SESSIONS" in detail

    assert open_session(server.url, agent_b[1]).status_code == 200  # B is not A

    sid = opened[0].headers["mcp-session-id"]
    ended = httpx.delete(
        f"{server.url}/mcp/",
        headers={
            "Authorization": f"Bearer {agent_a[1]}",
            "mcp-session-id": sid,
            "mcp-protocol-version": "2025-06-18",
        },
    )
    assert ended.status_code == 200
    assert open_session(server.url, agent_a[1]).status_code == 200


def mcp_post(url: str, token: str, sid: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(
        f"{url}/mcp/",
        json=body,
        timeout=60,
        headers={
            "Authorization": f"Bearer {token}",
            "mcp-session-id": sid,
            "mcp-protocol-version": "2025-06-18",
            "accept": "application/json, text/event-stream",
        },
    )


def ready_session(url: str, token: str) -> str:
    sid = open_session(url, token).headers["mcp-session-id"]
    done = mcp_post(url, token, sid, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert done.status_code == 202
    return sid
