"""Abuse cases for fairness between agents (API.md, Conventions: fairness): one agent's
open requests, long-polls, duplicates, MCP sessions cannot take what another needs."""

from __future__ import annotations

import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

from tests.conftest import Shop
from tests.waiting import wait_until

HELD = {"step_index": 0, "tool": "charge", "args": {"order_id": "o-1", "amount": "5.00"}}
# "Was still served during the attack": generous, for a busy two-core machine.
SERVED_WITHIN_S = 3.0


def _client(server: Any, token: str, timeout: float = 60) -> httpx.Client:
    return httpx.Client(
        base_url=f"{server.url}/api/v1",
        timeout=timeout,
        headers={"Authorization": f"Bearer {token}"},
        limits=httpx.Limits(max_connections=200, max_keepalive_connections=200),
    )


def _held_call(a: httpx.Client) -> str:
    assert a.post("/runs", json={"run_id": "r-a"}).status_code == 201
    held = a.post("/runs/r-a/calls", json=HELD).json()
    assert held["status"] == "pending_approval"
    return str(held["call_id"])


def _open_long_polls(a: httpx.Client, call_id: str, count: int, seconds: float) -> Any:
    """`count` long-polls by agent A on its held call; waits until the server holds them
    all (each answer is 202 at its deadline), returns the futures."""

    def poll() -> httpx.Response:
        while True:  # refused while _until_held's probe held a slot: try again
            answer = a.get(f"/calls/{call_id}", params={"wait": seconds})
            if answer.status_code != 429:
                return answer
            time.sleep(0.05)  # the attacker's pause between retries: pacing, not a wait

    pool = ThreadPoolExecutor(max_workers=count)
    futures = [pool.submit(poll) for _ in range(count)]
    pool.shutdown(wait=False)
    return futures


def _until_held(server: Any, token: str, count: int) -> None:
    """Poll until agent A's `count` requests are in progress: its next one is refused."""
    probe = _client(server, token, timeout=5)
    wait_until(
        lambda: probe.get("/tools").status_code == 429,
        30,
        failure=f"the server never held {count} requests of agent A",
    )


def test_64_long_polls_by_one_agent_do_not_delay_another_agents_requests(
    toolops_server: Any, agent_a: Any, agent_b: Any, shop: Shop
) -> None:
    # As many long-polls as the cap allows, far more than the API's threads.
    server = toolops_server(TOOLOPS_API_THREADS="4", TOOLOPS_AGENT_MAX_INFLIGHT="64")
    a, b = _client(server, agent_a[1]), _client(server, agent_b[1])
    call_id = _held_call(a)
    polls = _open_long_polls(a, call_id, 64, seconds=10)
    _until_held(server, agent_a[1], 64)

    assert b.post("/runs", json={"run_id": "r-b"}).status_code == 201
    started = time.monotonic()
    tools = b.get("/tools")
    tools_s = time.monotonic() - started
    started = time.monotonic()
    read = b.post(
        "/runs/r-b/calls",
        json={
            "step_index": 0,
            "tool": "query_stock",
            "args": {"sku": "A12"},
        },
    )
    call_s = time.monotonic() - started

    assert tools.status_code == 200 and tools_s < SERVED_WITHIN_S
    assert read.json()["status"] == "succeeded" and call_s < SERVED_WITHIN_S
    assert not any(f.done() for f in polls)  # the attack was still on
    a.close()  # ends the long-polls: the server notices the client went away


def test_an_agent_over_its_in_flight_cap_gets_429_while_another_is_served(
    toolops_server: Any, agent_a: Any, agent_b: Any, shop: Shop
) -> None:
    server = toolops_server(TOOLOPS_AGENT_MAX_INFLIGHT="4")
    a, b = _client(server, agent_a[1]), _client(server, agent_b[1])
    call_id = _held_call(a)
    polls = _open_long_polls(a, call_id, 4, seconds=10)
    _until_held(server, agent_a[1], 4)

    refused = a.get("/tools")
    assert refused.status_code == 429
    assert int(refused.headers["retry-after"]) >= 1
    assert refused.headers["content-type"].startswith("application/problem+json")
    problem = refused.json()
    assert problem["status"] == 429 and problem["title"] and "in progress" in problem["detail"]
    assert b.get("/tools").status_code == 200
    assert not any(f.done() for f in polls)
    a.close()


def test_an_agent_whose_long_polls_went_away_gets_its_slots_back(
    toolops_server: Any, agent_a: Any, shop: Shop
) -> None:
    server = toolops_server(TOOLOPS_AGENT_MAX_INFLIGHT="4")
    a = _client(server, agent_a[1])
    call_id = _held_call(a)
    request = (
        f"GET /api/v1/calls/{call_id}?wait=10 HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Authorization: Bearer {agent_a[1]}\r\n\r\n"
    ).encode()
    sockets = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(4)]
    for s in sockets:
        s.sendall(request)
    _until_held(server, agent_a[1], 4)
    for s in sockets:  # the client goes away mid-wait
        s.close()

    wait_until(  # well before the long-polls end (10 s)
        lambda: a.get("/tools").status_code != 429,
        5,
        failure="the slots of a client gone away were kept",
    )


def test_a_concurrent_duplicate_with_wait_0_answers_at_once_in_progress(
    toolops_server: Any, agent_a: Any, shop: Shop
) -> None:
    server = toolops_server()
    a = _client(server, agent_a[1])
    assert a.post("/runs", json={"run_id": "r-dup"}).status_code == 201
    # The first request is at work downstream for a while (the shop is slow to answer).
    shop.fault("/inventory/reservations", latency_ms=1500)
    write = {"step_index": 0, "tool": "reserve_stock", "args": {"sku": "A12", "qty": 1}}
    first = threading.Thread(target=a.post, args=("/runs/r-dup/calls",), kwargs={"json": write})
    first.start()
    wait_until(
        lambda: shop.requests("/inventory/reservations"),
        10,
        every=0.02,
        failure="the first request never reached the shop",
    )

    started = time.monotonic()
    duplicate = a.post("/runs/r-dup/calls", json={**write, "wait": 0})
    answered_s = time.monotonic() - started
    first.join(30)
    assert duplicate.status_code == 202, duplicate.text
    assert duplicate.json()["status"] == "in_progress" and duplicate.json()["replayed"] is True
    assert answered_s < 1.0  # at once: before the first request's 1.5 s downstream answer
    assert len(shop.requests("/inventory/reservations")) == 1


def test_one_agent_cannot_open_every_mcp_session(
    toolops_server: Any, agent_a: Any, agent_b: Any, shop: Shop
) -> None:
    from tests.toolops.test_mcp_sessions import open_session

    server = toolops_server(TOOLOPS_MCP_AGENT_MAX_SESSIONS="3")
    answers = [open_session(server.url, agent_a[1]).status_code for _ in range(10)]
    assert answers == [200] * 3 + [429] * 7
    assert open_session(server.url, agent_b[1]).status_code == 200


def test_a_new_agent_gets_the_default_rate_limit(db: None, settings: Any) -> None:
    import io

    from django.core.management import call_command

    from toolops.models import Agent

    settings.TOOLOPS_AGENT_RATE_LIMIT_PER_MINUTE = 600
    call_command("create_agent", "newcomer", stdout=io.StringIO())
    assert Agent.objects.get(name="newcomer").rate_limit_per_minute == 600


def test_mcp_calls_waiting_for_a_reviewer_do_not_stall_another_agents_mcp_requests(
    toolops_server: Any, agent_a: tuple[Any, str], agent_b: tuple[Any, str], shop: Shop
) -> None:
    """More held calls than the process has worker threads (os.cpu_count() + 4 at most),
    each waiting TOOLOPS_MCP_WAIT_S for a reviewer: agent B's tools/list still answers."""
    from tests.toolops.test_mcp_sessions import mcp_post, ready_session
    from toolops.models import ToolCall

    server = toolops_server(TOOLOPS_MCP_WAIT_S="20")
    held = {"name": "charge", "arguments": {"order_id": "o-1", "amount": "5.00"}}
    sessions = [ready_session(server.url, agent_a[1]) for _ in range(12)]
    pool = ThreadPoolExecutor(len(sessions))
    waits = [
        pool.submit(
            mcp_post,
            server.url,
            agent_a[1],
            sid,
            {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": held},
        )
        for sid in sessions
    ]
    wait_until(
        lambda: ToolCall.objects.filter(status="pending_approval").count() >= len(sessions),
        30,
        failure="agent A's calls were not all held",
    )

    started = time.monotonic()
    sid = ready_session(server.url, agent_b[1])
    listed = mcp_post(
        server.url, agent_b[1], sid, {"jsonrpc": "2.0", "id": 3, "method": "tools/list"}
    )
    assert listed.status_code == 200 and "query_stock" in listed.text
    assert time.monotonic() - started < 5.0  # generous: was the whole 20 s wait before
    assert not any(w.done() for w in waits)  # the attack was still on
    pool.shutdown(wait=False, cancel_futures=True)
