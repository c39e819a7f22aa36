"""The per-agent rate limit across real web processes (uvicorn) on one PostgreSQL:
counted in Redis in the in-flight cap's round trip, exactly; without Redis, by each
process's allowance, exactly for a small limit and within the documented bound for a
large one; and with Redis out of reach, by the allowance."""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from tests.conftest import Shop, ToolOpsServer
from tests.redisdb import redis_url
from tests.toolops.api.helpers import assert_problem
from tests.waiting import wait_until
from toolops.accounts.models import token_digest
from toolops.api import allowance, inflight
from toolops.models import Agent, RateWindow
from toolops.services import agent_create

REDIS_URL = redis_url()  # this test worker's own database
needs_redis = pytest.mark.skipif(not REDIS_URL, reason="TOOLOPS_TEST_REDIS_URL is not set")


def start_two(toolops_server: Any, **env: str) -> list[ToolOpsServer]:
    """Two web processes, started side by side (each takes seconds to boot)."""
    with ThreadPoolExecutor(2) as pool:
        return list(pool.map(lambda _: toolops_server(**env), range(2)))


def a_minute_with_room(seconds: float) -> int:
    """The current minute window, once it has `seconds` left: a burst started now is
    counted in one window, not split by the minute's turn."""
    wait_until(lambda: 60 - time.time() % 60 >= seconds, seconds + 2, every=0.2)
    return int(time.time() // 60)


def still(window: int) -> None:
    assert int(time.time() // 60) == window, "the minute turned during the burst"


def tools(url: str, token: str) -> httpx.Response:
    return httpx.get(f"{url}/api/v1/tools", headers={"Authorization": f"Bearer {token}"})


def alternate(webs: list[ToolOpsServer], token: str, n: int) -> list[httpx.Response]:
    """`n` requests one after the other, to each process in turn."""
    return [tools(webs[i % len(webs)].url, token) for i in range(n)]


def assert_refused_for_the_minute(response: httpx.Response) -> None:
    assert_problem(response, 429)
    assert 1 <= int(response.headers["retry-after"]) <= 60


def minute_count(token: str, window: int) -> int:
    async def read() -> int:
        import redis.asyncio

        client = redis.asyncio.Redis.from_url(REDIS_URL)
        try:
            value = await client.get(f"toolops:minute:{token_digest(token)[:32]}:{window}")
        finally:
            await client.aclose()
        return int(value or 0)

    return asyncio.run(read())


@needs_redis
def test_two_processes_hold_the_limit_exactly_through_redis(
    toolops_server: Any, shop: Shop
) -> None:
    _, token = agent_create(name="limited", rate_limit_per_minute=5)
    free, free_token = agent_create(name="free", rate_limit_per_minute=0)
    webs = start_two(toolops_server, REDIS_URL=REDIS_URL)
    window = a_minute_with_room(20)

    answers = alternate(webs, token, 8)
    free_answers = alternate(webs, free_token, 12)
    still(window)

    assert [a.status_code for a in answers] == [200] * 5 + [429] * 3
    for refused in answers[5:]:
        assert_refused_for_the_minute(refused)
    assert minute_count(token, window) == 8
    # Counted in Redis only: no window row, no statement of its own.
    assert not RateWindow.objects.exists()
    # 0 is no limit: never refused, and not counted once a process knows the agent (its
    # first request on each process, before that, is).
    assert {a.status_code for a in free_answers} == {200}
    assert minute_count(free_token, window) <= 2
    assert free.rate_limit_per_minute == 0


def test_two_processes_share_the_limit_through_the_database_without_redis(
    toolops_server: Any, shop: Shop
) -> None:
    small, small_token = agent_create(name="small", rate_limit_per_minute=5)  # B = 1
    large, large_token = agent_create(name="large", rate_limit_per_minute=150)  # B = 3
    _, free_token = agent_create(name="free", rate_limit_per_minute=0)
    webs = start_two(toolops_server, REDIS_URL="")
    window = a_minute_with_room(30)

    answers = alternate(webs, small_token, 8)
    with ThreadPoolExecutor(8) as pool:
        burst = list(pool.map(lambda i: tools(webs[i % 2].url, large_token), range(200)))
    free_answers = alternate(webs, free_token, 12)
    still(window)

    # A small limit holds exactly: an upsert per request.
    assert [a.status_code for a in answers] == [200] * 5 + [429] * 3
    assert_refused_for_the_minute(answers[5])
    # The 5 let in, and the 6th, refused on the total its upsert returned; the 7th and
    # 8th were refused by their processes on the totals they had seen, with no statement.
    assert RateWindow.objects.get(agent=small, window=window).count == 6
    # A large one within the documented bound: limit + (N - 1)(B - 1) = 152.
    admitted = sum(a.status_code == 200 for a in burst)
    assert 150 <= admitted <= 150 + (2 - 1) * (allowance.batch_for(150) - 1)
    assert {a.status_code for a in burst} == {200, 429}
    assert {a.status_code for a in free_answers} == {200}
    assert set(RateWindow.objects.values_list("agent__name", flat=True)) == {"small", "large"}
    assert large.rate_limit_per_minute == 150


def test_redis_out_of_reach_counts_the_limit_in_the_database(
    toolops_server: Any, shop: Shop
) -> None:
    agent, token = agent_create(name="limited", rate_limit_per_minute=3)
    web = toolops_server(REDIS_URL="redis://127.0.0.1:1/0")
    window = a_minute_with_room(15)

    answers = alternate([web], token, 4)
    still(window)

    assert [a.status_code for a in answers] == [200, 200, 200, 429]
    assert_refused_for_the_minute(answers[3])
    # The 4th was refused on the total the 3rd's upsert returned: no statement for it.
    assert RateWindow.objects.get(agent=agent, window=window).count == 3


@needs_redis
def test_redis_slots_count_the_minute_in_the_same_round_trip() -> None:
    async def scenario() -> None:
        key = f"test-{time.time_ns()}"
        one, two = inflight.RedisSlots(2, REDIS_URL), inflight.RedisSlots(2, REDIS_URL)
        first, second = await one.acquire(key), await two.acquire(key)
        refused = await one.acquire(key)  # past the in-flight cap
        uncounted = await two.acquire(key, count_minute=False)

        a, b = inflight.minute_of(first), inflight.minute_of(second)
        assert a is not None and b is not None
        assert (a.requests, b.requests) == (1, 2)  # shared by both "processes"
        assert refused is None
        assert uncounted is None  # still two in flight; and it counted nothing
        await one.release(key, first)
        third = await one.acquire(key)
        assert inflight.minute_of(third) == (b.window, 3)  # the refused ones not counted
        for slot in (second, third):
            await one.release(key, slot)
        quiet = await one.acquire(key, count_minute=False)
        assert quiet and inflight.minute_of(quiet) is None
        assert inflight.minute_of(await one.acquire(key)) == (b.window, 4)

    asyncio.run(scenario())


@pytest.mark.django_db
def test_auth_compares_the_count_the_handler_took(settings: Any) -> None:
    from toolops.api.auth import RateLimited, agent_for_token

    _, token = agent_create(name="limited", rate_limit_per_minute=3)
    window = int(time.time() // 60)

    assert agent_for_token(token, minute=inflight.MinuteCount(window, 3)) is not None
    with pytest.raises(RateLimited) as refused:
        agent_for_token(token, minute=inflight.MinuteCount(window, 4))
    assert 0 < (refused.value.wait or 0) <= 60
    assert not RateWindow.objects.exists()  # Redis counted; the database was not asked
    assert Agent.objects.get(name="limited").rate_limit_per_minute == 3
