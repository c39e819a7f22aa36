"""Graceful shutdown of a web process (toolops/stopping.py), as a deployment stops one:
SIGTERM to a real uvicorn process. A call in flight finishes with its real answer;
/readyz answers 503 during the drain, so a balancer takes the process out of rotation;
a long-poll waiting for a reviewer answers at once with the call still pending, for the
agent to ask again elsewhere."""

from __future__ import annotations

import signal
import threading
from typing import Any

import httpx
import pytest
from django.conf import settings

from tests.conftest import Shop, write_catalog
from tests.waiting import wait_until
from toolops.models import Approval

pytestmark = pytest.mark.skipif(
    not settings.DATABASES["default"]["ENGINE"].endswith("postgresql"),
    reason="real web processes on PostgreSQL",
)

# A read the shop answers slowly (its latency fault), with room for it in its timeout.
SLOW_TOOL = """
[[tool]]
name = "slow_stock"
kind = "read"
description = "query_stock, with a patient timeout."
url = "{shop}/inventory/stock"
method = "POST"
timeout_s = 20.0
max_attempts = 1
params_schema = { type = "object", required = ["sku"], properties = { sku = { type = "string" } } }
"""
HELD = {"step_index": 0, "tool": "charge", "args": {"order_id": "o-1", "amount": "5.00"}}


def client(server: Any, token: str, timeout: float = 60) -> httpx.Client:
    return httpx.Client(
        base_url=f"{server.url}/api/v1",
        timeout=timeout,
        headers={"Authorization": f"Bearer {token}"},
    )


def in_background(fn: Any) -> tuple[threading.Thread, list[Any]]:
    out: list[Any] = []

    def run() -> None:
        try:
            out.append(fn())
        except BaseException as exc:  # noqa: BLE001 - the test reads it
            out.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, out


def test_sigterm_drains_then_finishes_the_call_in_flight_with_its_real_answer(
    toolops_server: Any, agent_a: Any, shop: Shop
) -> None:
    catalog = write_catalog(shop.url, SLOW_TOOL.replace("{shop}", shop.url))
    server = toolops_server(TOOLOPS_TOOLS_FILE=str(catalog), TOOLOPS_SHUTDOWN_DRAIN_S="3")
    a = client(server, agent_a[1])
    assert a.post("/runs", json={"run_id": "r-s"}).status_code == 201
    assert httpx.get(f"{server.url}/readyz", timeout=10).status_code == 200
    shop.fault("/inventory/stock", latency_ms=5000)
    call = {"step_index": 0, "tool": "slow_stock", "args": {"sku": "D9"}}
    thread, answers = in_background(lambda: a.post("/runs/r-s/calls", json=call))
    wait_until(
        lambda: shop.requests("/inventory/stock"),
        20,
        every=0.05,
        failure="the call never reached the shop",
    )

    server.proc.send_signal(signal.SIGTERM)
    # Draining: still serving, and not ready — a balancer's check sees the 503.
    drained = httpx.get(f"{server.url}/readyz", timeout=10)
    assert drained.status_code == 503, drained.text
    assert drained.json() == {"status": "not ready", "checks": {"shutdown": "in progress"}}
    assert httpx.get(f"{server.url}/healthz", timeout=10).status_code == 200

    thread.join(60)
    [answer] = answers
    assert isinstance(answer, httpx.Response), answer
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["status"] == "succeeded" and body["result"]["sku"] == "D9", str(body)
    assert server.proc.wait(30) is not None  # then it exits
    catalog.unlink()


def test_a_long_poll_for_a_reviewer_answers_at_sigterm_with_the_call_still_pending(
    toolops_server: Any, agent_a: Any, shop: Shop
) -> None:
    server = toolops_server()
    # The agent's patience is shorter than its wait: only an answer at the signal, not
    # at the wait's end (30 s), arrives in time.
    a = client(server, agent_a[1], timeout=15)
    assert a.post("/runs", json={"run_id": "r-w"}).status_code == 201
    thread, answers = in_background(lambda: a.post("/runs/r-w/calls", json={**HELD, "wait": 30}))
    wait_until(Approval.objects.exists, 20, failure="the call was never held")

    server.proc.send_signal(signal.SIGTERM)
    thread.join(30)
    [answer] = answers
    assert isinstance(answer, httpx.Response), answer  # not a timeout, not a dropped line
    assert answer.status_code == 202, answer.text
    body = answer.json()
    assert body["status"] == "pending_approval" and body["approval"]["status"] == "pending"
    assert server.proc.wait(30) is not None
    assert Approval.objects.get().status == "pending"  # the agent asks again elsewhere
