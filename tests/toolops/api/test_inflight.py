"""The per-agent cap on requests in progress (toolops/api/inflight.py): counted in the
process, or across processes through Redis; a slot is always given back."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
import pytest

from tests.conftest import Shop
from tests.redisdb import redis_url
from tests.waiting import wait_until
from toolops.api import inflight

REDIS_URL = redis_url()  # this test worker's own database
needs_redis = pytest.mark.skipif(not REDIS_URL, reason="TOOLOPS_TEST_REDIS_URL is not set")


def test_it_keys_a_request_by_its_bearer_tokens_digest() -> None:
    scope = {"headers": [(b"host", b"x"), (b"authorization", b"Bearer tops_abc")]}
    key = inflight.agent_key(scope)
    assert key is not None and len(key) == 64
    assert inflight.agent_key({"headers": [(b"authorization", b"Basic abc")]}) is None
    assert inflight.agent_key({"headers": []}) is None


def test_local_slots_refuse_past_the_limit_and_come_back() -> None:
    async def scenario() -> None:
        slots = inflight.LocalSlots(2)
        one, two = await slots.acquire("a"), await slots.acquire("a")
        assert one and two
        assert await slots.acquire("a") is None
        assert await slots.acquire("b")  # another agent is counted apart
        await slots.release("a", one)
        assert await slots.acquire("a")
        for slot in (two, "a"):
            await slots.release("a", slot)
        assert "a" not in slots.counts  # nothing left behind for a quiet agent

    asyncio.run(scenario())


@needs_redis
def test_redis_slots_are_shared_between_processes_and_age_out(monkeypatch: Any) -> None:
    async def scenario() -> None:
        import redis.asyncio

        key = f"test-{time.time_ns()}"
        one, two = inflight.RedisSlots(2, REDIS_URL), inflight.RedisSlots(2, REDIS_URL)
        first = await one.acquire(key)
        assert first and await two.acquire(key)
        assert await one.acquire(key) is None  # the other "process" holds the second
        await one.release(key, first)
        assert await two.acquire(key)
        # A process that died holding slots: they stop counting after SLOT_TTL_S.
        monkeypatch.setattr(inflight, "SLOT_TTL_S", 0)
        assert await one.acquire(key)
        client = redis.asyncio.Redis.from_url(REDIS_URL)
        await client.delete(f"toolops:inflight:{key[:32]}")
        await client.aclose()

    asyncio.run(scenario())


def test_redis_out_of_reach_serves_the_request_uncounted() -> None:
    async def scenario() -> None:
        slots = inflight.RedisSlots(1, "redis://127.0.0.1:1/0")
        slot = await slots.acquire("a")
        assert slot is False  # served, not refused
        await slots.release("a", slot)

    asyncio.run(scenario())


@needs_redis
def test_two_web_processes_share_one_agents_cap_through_redis(
    toolops_server: Any, agent_a: Any, shop: Shop
) -> None:
    env = {"REDIS_URL": REDIS_URL, "TOOLOPS_AGENT_MAX_INFLIGHT": "2"}
    first, second = toolops_server(**env), toolops_server(**env)
    headers = {"Authorization": f"Bearer {agent_a[1]}"}
    a = httpx.Client(base_url=f"{first.url}/api/v1", headers=headers, timeout=30)
    assert a.post("/runs", json={"run_id": "r-a"}).status_code == 201
    held = a.post(
        "/runs/r-a/calls",
        json={
            "step_index": 0,
            "tool": "charge",
            "args": {"order_id": "o-1", "amount": "5.00"},
        },
    ).json()

    from concurrent.futures import ThreadPoolExecutor

    pool = ThreadPoolExecutor(2)
    polls = [pool.submit(a.get, f"/calls/{held['call_id']}", params={"wait": 8}) for _ in range(2)]
    b = httpx.Client(base_url=f"{second.url}/api/v1", headers=headers, timeout=5)
    # Served by the other process: refused once it counts the first process's slots.
    answer = wait_until(
        lambda: (r := b.get("/tools")).status_code == 429 and r,
        20,
        failure="the second process never saw the first's slots",
    )
    assert answer.headers["retry-after"] == "1"
    assert all(f.result().status_code == 202 for f in polls)
    assert b.get("/tools").status_code == 200  # the slots came back
    pool.shutdown()


def test_the_handler_gives_a_slot_back_when_the_request_fails(settings: Any) -> None:
    from toolops.api.middleware import ApiASGIHandler

    settings.REDIS_URL = ""
    handler = ApiASGIHandler()

    def broken(*args: Any) -> Any:
        raise RuntimeError("the view blew up")

    handler._respond = broken  # type: ignore[method-assign]
    scope = {
        "type": "http",
        "method": "GET",
        "path": "/api/v1/tools",
        "query_string": b"",
        "headers": [(b"authorization", b"Bearer tops_x")],
    }

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        pass

    with pytest.raises(RuntimeError):
        asyncio.run(handler(scope, receive, send))
    assert handler.slots.counts == {}  # type: ignore[union-attr]
