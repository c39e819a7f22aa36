"""Twenty identical create_order calls at the same moment, over real HTTP against real
ToolOps processes: the claim (INSERT … ON CONFLICT DO NOTHING) lets exactly one reach the
orders service, and every other request answers with the winner's call."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

from tests.conftest import Shop
from toolops.models import IdempotencyRecord, ToolCall

from .helpers import allow_without_approval

ORDER = {"sku": "A12", "qty": 1, "amount": "199.00"}
CALLERS = 20


def _headers(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _create_run(base_url: str, token: str, run_id: str) -> None:
    response = httpx.post(
        f"{base_url}/api/v1/runs", json={"run_id": run_id}, headers=_headers(token), timeout=10
    )
    assert response.status_code == 201, response.text


def _fire_together(
    base_urls: list[str], token: str, run_id: str, body: dict[str, Any]
) -> list[httpx.Response]:
    """CALLERS threads post the same call at once, spread over the given servers."""
    barrier = threading.Barrier(CALLERS)
    limits = httpx.Limits(max_connections=CALLERS, max_keepalive_connections=CALLERS)
    with httpx.Client(headers=_headers(token), timeout=40, limits=limits) as client:

        def one(n: int) -> httpx.Response:
            url = f"{base_urls[n % len(base_urls)]}/api/v1/runs/{run_id}/calls"
            barrier.wait()
            # The duplicates wait for the winner's answer (with `wait` 0 they would
            # answer `in_progress` at once, API.md).
            return client.post(url, json={**body, "wait": 30})

        with ThreadPoolExecutor(CALLERS) as pool:
            return list(pool.map(one, range(CALLERS)))


def _assert_one_order(shop: Shop, run_id: str, answers: list[httpx.Response]) -> dict[str, Any]:
    assert [a.status_code for a in answers] == [200] * CALLERS, [a.text for a in answers]
    bodies = [a.json() for a in answers]
    assert {b["status"] for b in bodies} == {"succeeded"}, bodies
    assert len({b["call_id"] for b in bodies}) == 1
    assert len({b["result"]["order_id"] for b in bodies}) == 1
    # One request did the work; the other nineteen were answered from its record.
    assert sorted(b["replayed"] for b in bodies) == [False] + [True] * (CALLERS - 1)

    assert len(shop.requests("/orders")) == 1
    orders = shop.state()["orders"]
    assert [o["order_id"] for o in orders] == [bodies[0]["result"]["order_id"]]
    assert ToolCall.objects.filter(run__run_id=run_id).count() == 1
    assert list(IdempotencyRecord.objects.values_list("state", flat=True)) == ["recorded"]
    return bodies[0]


def _assert_replay(
    base_url: str, token: str, run_id: str, body: dict[str, Any], first: dict[str, Any], shop: Shop
) -> None:
    again = httpx.post(
        f"{base_url}/api/v1/runs/{run_id}/calls", json=body, headers=_headers(token), timeout=10
    )
    assert again.status_code == 200, again.text
    assert again.json()["replayed"] is True
    assert again.json()["call_id"] == first["call_id"]
    assert again.json()["result"] == first["result"]
    assert len(shop.requests("/orders")) == 1
    assert ToolCall.objects.filter(run__run_id=run_id).count() == 1


def test_it_sends_one_order_for_twenty_concurrent_calls_without_tool_call_id(
    toolops_server: Any, agent_a: Any, shop: Shop
) -> None:
    allow_without_approval("create_order")
    server = toolops_server()
    token = agent_a[1]
    _create_run(server.url, token, "r-conc")
    # Hold the order in the shop so that all twenty calls are in flight together.
    shop.fault("/orders", latency_ms=300)
    body = {"step_index": 2, "tool": "create_order", "args": ORDER}

    answers = _fire_together([server.url], token, "r-conc", body)

    first = _assert_one_order(shop, "r-conc", answers)
    _assert_replay(server.url, token, "r-conc", body, first, shop)


def test_it_sends_one_order_for_twenty_concurrent_calls_with_one_tool_call_id(
    toolops_server: Any, agent_a: Any, shop: Shop
) -> None:
    allow_without_approval("create_order")
    server = toolops_server()
    token = agent_a[1]
    _create_run(server.url, token, "r-conc")
    shop.fault("/orders", latency_ms=300)
    body = {"step_index": 2, "tool": "create_order", "args": ORDER, "tool_call_id": "tc-9"}

    answers = _fire_together([server.url], token, "r-conc", body)

    first = _assert_one_order(shop, "r-conc", answers)
    assert {a.json()["tool_call_id"] for a in answers} == {"tc-9"}
    _assert_replay(server.url, token, "r-conc", body, first, shop)


def test_it_sends_one_order_when_the_calls_arrive_at_two_server_processes(
    toolops_server: Any, agent_a: Any, shop: Shop
) -> None:
    # Any number of stateless web processes (DESIGN.md): the claim lives in the database,
    # so two processes racing for one key still agree on one winner.
    allow_without_approval("create_order")
    servers = [toolops_server(), toolops_server()]
    token = agent_a[1]
    _create_run(servers[0].url, token, "r-conc")
    shop.fault("/orders", latency_ms=300)
    body = {"step_index": 2, "tool": "create_order", "args": ORDER}

    answers = _fire_together([s.url for s in servers], token, "r-conc", body)

    first = _assert_one_order(shop, "r-conc", answers)
    _assert_replay(servers[1].url, token, "r-conc", body, first, shop)
