"""The executor API as served (uvicorn, toolops.asgi): requests run on a shared pool of
threads, so one agent's long-poll does not hold up another agent's calls, and every
request hands its database connection back when it ends."""

from __future__ import annotations

import threading
import time
from typing import Any

import httpx

from tests.conftest import Shop
from tests.toolops.api.helpers import Sent


def test_a_long_poll_does_not_hold_up_other_requests(
    toolops_server: Any, agent_a: tuple[Any, str], agent_b: tuple[Any, str], shop: Shop
) -> None:
    server = toolops_server(TOOLOPS_API_THREADS="2", TOOLOPS_DB_POOL_MAX="3")
    a = httpx.Client(
        base_url=f"{server.url}/api/v1",
        timeout=30,
        headers={"Authorization": f"Bearer {agent_a[1]}"},
    )
    b = httpx.Client(
        base_url=f"{server.url}/api/v1",
        timeout=30,
        headers={"Authorization": f"Bearer {agent_b[1]}"},
    )
    assert a.post("/runs", json={"run_id": "r-a"}).status_code == 201
    held = a.post(
        "/runs/r-a/calls",
        json={
            "step_index": 0,
            "tool": "charge",
            "args": {"order_id": "o-1", "amount": "5.00"},
        },
    ).json()
    assert held["status"] == "pending_approval"

    ended: dict[str, float] = {}
    answers: list[httpx.Response] = []
    sent = Sent()

    def long_poll() -> None:
        # Up to 30 s: it ends when its run does, below.
        answers.append(
            a.get(f"/calls/{held['call_id']}", params={"wait": 30}, extensions=sent.extensions)
        )
        ended["poll"] = time.monotonic()

    poller = threading.Thread(target=long_poll)
    poller.start()
    assert sent.wait(30), "the long-poll was never sent"
    # Many more requests than threads and pooled connections, one after another.
    assert b.post("/runs", json={"run_id": "r-b"}).status_code == 201
    for step in range(12):
        done = b.post(
            "/runs/r-b/calls",
            json={
                "step_index": step,
                "tool": "query_stock",
                "args": {"sku": "A12"},
            },
        )
        assert done.status_code == 200 and done.json()["status"] == "succeeded"
    ended["others"] = time.monotonic()
    # Only now does the held call end (its run is completed): the long-poll answers.
    assert a.post("/runs/r-a/complete").status_code == 200
    poller.join(40)

    assert ended["others"] < ended["poll"]
    [answer] = answers
    assert answer.status_code == 200
    assert answer.json()["status"] == "rejected"
    assert len(shop.requests("/inventory/stock")) == 12
