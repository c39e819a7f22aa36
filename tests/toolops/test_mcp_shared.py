"""An MCP session is served by every web process, as behind a round-robin balancer: two
real ToolOps processes on one database, the requests of one session sent to either. The
session's calls land in one run, it answers only its agent, the agent's cap counts its
sessions on both processes, DELETE on one ends it on both, and idleness is judged from
its last request on any process."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.conftest import Shop, ToolOpsServer, server_env, write_catalog
from tests.toolops.test_mcp_sessions import mcp_post, open_session
from tests.waiting import wait_until
from toolops.models import Run

IDLE_S = 6  # the sessions' idle time on both processes (TOOLOPS_MCP_IDLE_S)
CAP = 3  # sessions per agent (TOOLOPS_MCP_AGENT_MAX_SESSIONS)
RESERVE = {"sku": "A12", "qty": 1}


@pytest.fixture(scope="module")
def pair(
    django_db_setup: None, django_db_blocker: Any, shop_server: Shop
) -> Iterator[tuple[ToolOpsServer, ToolOpsServer]]:
    """Two web processes of one deployment, shared by this file's tests."""
    catalog = write_catalog(shop_server.url)
    with django_db_blocker.unblock():
        env = server_env(
            TOOLOPS_TOOLS_FILE=str(catalog),
            TOOLOPS_MCP_IDLE_S=str(IDLE_S),
            TOOLOPS_MCP_AGENT_MAX_SESSIONS=str(CAP),
            TOOLOPS_MCP_WAIT_S="1",
        )
    servers: list[ToolOpsServer] = []
    try:
        servers += [ToolOpsServer(env), ToolOpsServer(env)]
        yield servers[0], servers[1]
    finally:
        for server in servers:
            server.stop()
        Path(catalog).unlink(missing_ok=True)


def rpc(server: ToolOpsServer, token: str, sid: str, method: str, **params: Any) -> Any:
    """One JSON-RPC request of the session, to `server`: its result (the SSE answer's
    data), or the HTTP response when it was not a 200."""
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    response = mcp_post(server.url, token, sid, body)
    if response.status_code != 200:
        return response
    data = [line[5:] for line in response.text.splitlines() if line.startswith("data:")]
    message = json.loads(next(d for d in data if d.strip()))
    assert "error" not in message, message
    return message["result"]


def delete(server: ToolOpsServer, token: str, sid: str) -> httpx.Response:
    return httpx.delete(
        f"{server.url}/mcp/",
        timeout=20,
        headers={
            "Authorization": f"Bearer {token}",
            "mcp-session-id": sid,
            "mcp-protocol-version": "2025-06-18",
        },
    )


def status(answer: Any) -> int:
    return answer.status_code if isinstance(answer, httpx.Response) else 200


def test_a_session_opened_on_one_process_is_served_by_the_other(
    pair: Any, transactional_db: None, agent_a: Any, agent_b: Any, shop: Shop
) -> None:
    a, b = pair
    token = agent_a[1]
    opened = open_session(a.url, token)
    assert opened.status_code == 200
    sid = opened.headers["mcp-session-id"]
    done = mcp_post(b.url, token, sid, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert done.status_code == 202, done.text  # was 404: B did not know the session

    listed = rpc(b, token, sid, "tools/list")
    assert "query_stock" in {t["name"] for t in listed["tools"]}
    reserved = rpc(a, token, sid, "tools/call", name="reserve_stock", arguments=RESERVE)
    stock = rpc(b, token, sid, "tools/call", name="query_stock", arguments={"sku": "A12"})
    assert not reserved["isError"] and reserved["structuredContent"]["reservation_id"]
    assert not stock["isError"] and stock["structuredContent"]["sku"] == "A12"
    # A retry of the write without ids, on the other process: the same call.
    again = rpc(b, token, sid, "tools/call", name="reserve_stock", arguments=RESERVE)
    assert again["structuredContent"] == reserved["structuredContent"]
    assert len(shop.requests("/inventory/reservations")) == 1

    # One session, one run: both processes' calls are in it.
    [run] = Run.objects.filter(agent=agent_a[0])
    assert run.run_id == f"mcp-{sid}" and run.status == "running"
    assert sorted(run.calls.values_list("tool", flat=True)) == ["query_stock", "reserve_stock"]

    # Another agent's token gets 404 for it, on either process; the session goes on.
    assert status(rpc(b, agent_b[1], sid, "tools/list")) == 404
    assert status(rpc(a, agent_b[1], sid, "tools/list")) == 404
    assert delete(b, agent_b[1], sid).status_code == 404
    assert status(rpc(a, token, sid, "tools/list")) == 200

    # DELETE on B ends it on both: its run is complete, A answers 404 from then on.
    assert delete(b, token, sid).status_code == 200
    assert Run.objects.get(pk=run.pk).status == "completed"
    assert status(rpc(a, token, sid, "tools/list")) == 404
    assert status(rpc(b, token, sid, "tools/list")) == 404


def test_the_agents_cap_counts_its_sessions_on_every_process(
    pair: Any, transactional_db: None, agent_a: Any, agent_b: Any, shop: Shop
) -> None:
    a, b = pair
    token = agent_a[1]
    opened = [open_session(s.url, token) for s in (a, b, a)]
    assert [r.status_code for r in opened] == [200] * CAP
    for server in (b, a):  # B alone holds one session, A two: the cap is the agent's
        refused = open_session(server.url, token)
        assert refused.status_code == 429
        assert f"{CAP} MCP sessions open" in refused.json()["detail"]
    assert open_session(b.url, agent_b[1]).status_code == 200  # B is not A

    # A session opened on A and ended on B gives its place back, on either process.
    assert delete(b, token, opened[0].headers["mcp-session-id"]).status_code == 200
    assert open_session(b.url, token).status_code == 200
    assert open_session(a.url, token).status_code == 429


def test_a_session_busy_on_one_process_is_not_ended_idle_by_the_other(
    pair: Any, transactional_db: None, agent_a: Any, shop: Shop
) -> None:
    a, b = pair
    token = agent_a[1]
    sid = open_session(a.url, token).headers["mcp-session-id"]
    reserved = rpc(a, token, sid, "tools/call", name="reserve_stock", arguments=RESERVE)
    assert not reserved["isError"]
    run = Run.objects.get(agent=agent_a[0], run_id=f"mcp-{sid}")

    # Used on B only, for longer than the idle time (A's own handle on it goes idle).
    busy_until = time.monotonic() + 2 * IDLE_S
    while time.monotonic() < busy_until:
        assert status(rpc(b, token, sid, "tools/list")) == 200
        time.sleep(0.5)  # the client's pace: a request well within every idle time
    assert Run.objects.get(pk=run.pk).status == "running"
    assert status(rpc(a, token, sid, "tools/list")) == 200

    # Left alone, it ends once idle: its run is completed, and both processes say 404.
    wait_until(lambda: Run.objects.get(pk=run.pk).status == "completed", 60)
    assert status(rpc(a, token, sid, "tools/list")) == 404
    assert status(rpc(b, token, sid, "tools/list")) == 404


class RoundRobin(httpx2.AsyncBaseTransport):
    """A balancer in the client: each request to the next process in turn."""

    def __init__(self, servers: tuple[ToolOpsServer, ...]) -> None:
        self.ports = [s.port for s in servers]
        self.sent = 0
        self.inner = httpx2.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        request.url = request.url.copy_with(port=self.ports[self.sent % len(self.ports)])
        self.sent += 1
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


@asynccontextmanager
async def balanced_client(pair: Any, token: str) -> AsyncIterator[tuple[Client, RoundRobin]]:
    balancer = RoundRobin(pair)
    http = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {token}"}, timeout=60, transport=balancer
    )
    async with http, Client(streamable_http_client(f"{pair[0].url}/mcp/", http_client=http)) as c:
        yield c, balancer


def test_the_sdks_client_behind_a_round_robin_keeps_its_session(
    pair: Any, transactional_db: None, agent_a: Any, shop: Shop
) -> None:
    import asyncio

    async def scenario() -> tuple[Any, Any, int]:
        async with balanced_client(pair, agent_a[1]) as (client, balancer):
            await client.list_tools()
            first = await client.call_tool("reserve_stock", RESERVE)
            stock = await client.call_tool("query_stock", {"sku": "A12"})
            return first, stock, balancer.sent

    first, stock, sent = asyncio.run(scenario())
    assert not first.is_error and not stock.is_error and sent >= 4
    [run] = Run.objects.filter(agent=agent_a[0])
    assert run.run_id.startswith("mcp-")
    assert sorted(run.calls.values_list("tool", flat=True)) == ["query_stock", "reserve_stock"]
    # The client closed its session (DELETE, on whichever process): the run is complete.
    wait_until(lambda: Run.objects.get(pk=run.pk).status == "completed")
