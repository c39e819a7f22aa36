"""Wide args (docs/security.md "Limits"): bodies under the 1 MiB cap with ~100,000 keys
cost half a second of CPU each in the schema check and the canonical form, and sixteen
streams of them from one agent, far under its rate limit, took another agent's
`GET /tools` from 25 ms to seconds. Each test sends what that agent sent, to a real
ToolOps process, and expects a refusal decided before the expensive work: a 400 naming
the bound, then 429 with Retry-After while the agent is in debt for what its bodies
cost; another agent is answered all along, and nothing is stored or sent."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import httpx

from tests.conftest import Shop
from tests.toolops.test_mcp_sessions import mcp_post, ready_session
from tests.waiting import wait_until
from toolops.models import ToolCall

# Just under 1 MiB: 80,000 keys, written as compactly as an attacker would.
WIDE = json.dumps(
    {"step_index": 0, "tool": "query_stock", "args": {f"k{i}": 0 for i in range(80_000)}},
    separators=(",", ":"),
)
ORDINARY = {"step_index": 0, "tool": "query_stock", "args": {"sku": "A12"}}


def _client(server: Any, token: str) -> httpx.Client:
    return httpx.Client(
        base_url=f"{server.url}/api/v1", timeout=60, headers={"Authorization": f"Bearer {token}"}
    )


def _post_wide(client: httpx.Client) -> httpx.Response:
    headers = {"Content-Type": "application/json"}
    return client.post("/runs/r-a/calls", content=WIDE, headers=headers)


def test_an_object_wider_than_the_bound_is_a_400_naming_it_and_nothing_is_stored(
    toolops_server: Any, agent_a: Any, shop: Shop
) -> None:
    server = toolops_server()
    with _client(server, agent_a[1]) as a:
        assert a.post("/runs", json={"run_id": "r-a"}).status_code == 201

        refused = _post_wide(a)

    assert refused.status_code == 400
    assert refused.headers["content-type"].startswith("application/problem+json")
    assert "more than 1,000 keys" in refused.json()["detail"]
    assert "at args" in refused.json()["detail"]
    assert not ToolCall.objects.exists()
    assert shop.requests() == []


def test_an_agent_sending_wide_bodies_is_told_to_wait_while_another_is_served(
    toolops_server: Any, agent_a: Any, agent_b: Any, shop: Shop
) -> None:
    server = toolops_server()
    a, b = _client(server, agent_a[1]), _client(server, agent_b[1])
    assert a.post("/runs", json={"run_id": "r-a"}).status_code == 201
    assert b.post("/runs", json={"run_id": "r-b"}).status_code == 201

    # Each body prices at ~174,000 units against a burst of 200,000 refilled at 50,000 a
    # second: the second puts the agent in debt, the third waits.
    statuses = [_post_wide(a).status_code for _ in range(4)]
    assert statuses[:2] == [400, 400]
    assert 429 in statuses[2:], statuses
    refused = _post_wide(a)
    assert refused.status_code == 429
    assert refused.headers["content-type"].startswith("application/problem+json")
    assert int(refused.headers["retry-after"]) >= 1
    assert "TOOLOPS_AGENT_WORK_PER_S" in refused.json()["detail"]
    # Even a small request waits its turn: the refusal comes before any body is parsed.
    assert a.get("/tools").status_code == 429

    assert b.get("/tools").status_code == 200
    read = b.post("/runs/r-b/calls", json=ORDINARY)
    assert read.json()["status"] == "succeeded"

    # Once its debt is paid (a request without a body adds none) the agent is served.
    wait_until(
        lambda: a.get("/tools").status_code == 200,
        int(refused.headers["retry-after"]) + 10,
        failure="agent A was never served again",
    )
    again = a.post("/runs/r-a/calls", json=ORDINARY)
    assert again.status_code == 200 and again.json()["status"] == "succeeded"
    assert sorted(ToolCall.objects.values_list("run__run_id", flat=True)) == ["r-a", "r-b"]
    a.close()
    b.close()


def test_sixteen_streams_of_wide_bodies_do_not_starve_another_agent(
    toolops_server: Any, agent_a: Any, agent_b: Any, shop: Shop
) -> None:
    server = toolops_server()
    with _client(server, agent_a[1]) as a:
        assert a.post("/runs", json={"run_id": "r-a"}).status_code == 201
    stop = threading.Event()
    seen: list[int] = []

    def stream() -> None:
        with _client(server, agent_a[1]) as mine:
            while not stop.is_set():
                seen.append(_post_wide(mine).status_code)

    attackers = [threading.Thread(target=stream, daemon=True) for _ in range(16)]
    for attacker in attackers:
        attacker.start()
    try:
        with _client(server, agent_b[1]) as b:
            deadline = time.monotonic() + 30
            while len(seen) < 50 and time.monotonic() < deadline:
                assert b.get("/tools").status_code == 200
            assert len(seen) >= 50, "the attack never got going"
            for _ in range(20):
                assert b.get("/tools").status_code == 200
    finally:
        stop.set()
        for attacker in attackers:
            attacker.join(60)
    assert set(seen) <= {400, 429}, set(seen)
    # Refused in debt, not parsed: far more 429s than the few wide bodies let in.
    assert seen.count(429) > seen.count(400)


def test_an_ordinary_agent_is_never_told_to_wait(
    toolops_server: Any, agent_a: Any, shop: Shop
) -> None:
    server = toolops_server()
    with _client(server, agent_a[1]) as a:
        assert a.post("/runs", json={"run_id": "r-a"}).status_code == 201
        statuses = {
            a.post("/runs/r-a/calls", json={**ORDINARY, "step_index": step}).status_code
            for step in range(300)
        }
    assert statuses == {200}


def test_mcp_shares_the_agents_work_budget_and_its_widths(
    toolops_server: Any, agent_a: Any, shop: Shop
) -> None:
    server = toolops_server()
    sid = ready_session(server.url, agent_a[1])
    wide = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {
            "name": "query_stock",
            "arguments": {f"k{i}": i for i in range(1001)},
        },
    }
    answer = mcp_post(server.url, agent_a[1], sid, wide)
    text = answer.text
    if answer.headers.get("content-type", "").startswith("text/event-stream"):
        text = next(line[5:] for line in text.splitlines() if line.startswith("data:"))
    error = json.loads(text)["error"]
    assert error["code"] == -32602 and "more than 1,000 keys" in error["message"], error

    with _client(server, agent_a[1]) as a:
        assert a.post("/runs", json={"run_id": "r-a"}).status_code == 201
        while _post_wide(a).status_code != 429:
            pass
    refused = mcp_post(server.url, agent_a[1], sid, wide)
    assert refused.status_code == 429
    assert int(refused.headers["retry-after"]) >= 1
    assert not ToolCall.objects.exists()
    assert shop.requests() == []
