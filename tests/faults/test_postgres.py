"""PostgreSQL faults, through a TCP fault proxy between a real ToolOps web process and the
database: restarted mid-load, unreachable for 30 s. The API answers 503 with Retry-After
and a problem body, promptly; no write is lost or made twice (the shop's ledger is the
judge); and the process heals by itself once the database is back."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from django.conf import settings
from django.db import connection

from tests.conftest import Shop, ToolOpsServer
from tests.faults.proxy import FaultProxy
from tests.waiting import wait_until
from toolops.models import ToolCall
from toolops.services import agent_create

pytestmark = pytest.mark.skipif(
    not settings.DATABASES["default"]["ENGINE"].endswith("postgresql"),
    reason="PostgreSQL faults need PostgreSQL",
)

PROMPT_S = 8.0  # an answer during an outage comes within this: never the outage's length


@dataclass
class Agent:
    """An agent's client: every answer it saw, and each call driven to its end."""

    http: httpx.Client
    run_id: str
    answers: list[tuple[float, httpx.Response]] = field(default_factory=list)

    def post_call(self, step: int) -> httpx.Response:
        request = {
            "step_index": step,
            "tool": "reserve_stock",
            "args": {"sku": "D9", "qty": 1},
            "tool_call_id": f"tc-{step}",
        }
        started = time.monotonic()
        response = self.http.post(f"/api/v1/runs/{self.run_id}/calls", json=request)
        self.answers.append((time.monotonic() - started, response))
        return response

    def attempt(self, step: int) -> dict[str, Any] | None:
        """One try; the call once it has ended, None to try again (the same request)."""
        response = self.post_call(step)
        if response.status_code == 200:
            return response.json()
        assert response.status_code in (202, 503), response.text
        return None

    def until_done(self, step: int, timeout: float = 60) -> dict[str, Any]:
        return wait_until(lambda: self.attempt(step), timeout, every=0.2)

    def failures(self) -> list[tuple[float, httpx.Response]]:
        return [(took, r) for took, r in self.answers if r.status_code >= 500]


@pytest.fixture
def pg_proxy() -> Iterator[FaultProxy]:
    db = settings.DATABASES["default"]
    host = db.get("HOST") or ""
    upstream = (
        host if host and not host.startswith("/") else "127.0.0.1",
        int(db.get("PORT") or 5432),
    )
    with FaultProxy(upstream=upstream) as proxy:
        yield proxy


@pytest.fixture
def proxied(
    toolops_server: Any, pg_proxy: FaultProxy, shop: Shop
) -> Iterator[tuple[ToolOpsServer, Agent]]:
    """A ToolOps web process whose database connections all go through the proxy, and an
    agent with a running run on it."""
    _, token = agent_create(name="agent-faults")
    db = connection.settings_dict
    user = f"{db['USER']}@" if db.get("USER") else ""
    server = toolops_server(
        DATABASE_URL=f"postgres://{user}127.0.0.1:{pg_proxy.port}/{db['NAME']}",
        TOOLOPS_CLAIM_LEASE_S="3",  # a claim whose holder lost the database: taken over soon
        TOOLOPS_METRICS_CACHE_S="0",  # /metrics reads the database on every scrape
    )
    with httpx.Client(
        base_url=server.url, headers={"Authorization": f"Bearer {token}"}, timeout=30
    ) as http:
        assert http.post("/api/v1/runs", json={"run_id": "r-faults"}).status_code == 201
        yield server, Agent(http, "r-faults")


def assert_unavailable(response: httpx.Response) -> None:
    """503, Retry-After, and an RFC 9457 problem body like every other API error's."""
    assert response.status_code == 503, response.text
    assert int(response.headers["Retry-After"]) >= 1
    assert response.headers["Content-Type"].startswith("application/problem+json")
    body = response.json()
    assert body["status"] == 503 and body["title"] == "Service Unavailable"
    assert "database" in body["detail"] and "same request" in body["detail"]


def assert_each_effect_once(agent: Agent, shop: Shop, calls: dict[int, dict[str, Any]]) -> None:
    """Every call ended succeeded, with its own reservation, in the shop's ledger once;
    ToolOps recorded each call once."""
    assert all(call["status"] == "succeeded" for call in calls.values()), calls
    reserved = [call["result"]["reservation_id"] for call in calls.values()]
    ledger = [row["reservation_id"] for row in shop.state()["reservations"]]
    assert sorted(ledger) == sorted(reserved) and len(set(ledger)) == len(calls)
    recorded = ToolCall.objects.filter(run__run_id=agent.run_id)
    assert sorted(recorded.values_list("tool_call_id", flat=True)) == sorted(
        f"tc-{step}" for step in calls
    )


def test_a_restart_mid_load_loses_no_call_and_makes_none_twice(
    proxied: tuple[ToolOpsServer, Agent], pg_proxy: FaultProxy, shop: Shop
) -> None:
    server, agent = proxied
    steps = 40
    calls: dict[int, dict[str, Any]] = {}
    errors: list[BaseException] = []

    def drive() -> None:
        try:
            for step in range(steps):
                calls[step] = agent.until_done(step)
        except BaseException as exc:  # noqa: BLE001 - the test's thread reports it below
            errors.append(exc)

    driver = threading.Thread(target=drive, daemon=True)
    driver.start()
    wait_until(lambda: len(calls) >= 5, 30)
    # PostgreSQL goes away: every connection reset, nothing listening for ~2 s.
    pg_proxy.refuse()
    pg_proxy.reset()
    pg_proxy.schedule([(2.0, "heal", None, {})])
    wait_until(lambda: not driver.is_alive(), 90, failure=lambda: f"{len(calls)} calls done")

    assert not errors, errors[0]
    assert len(calls) == steps
    assert_each_effect_once(agent, shop, calls)
    # The outage was seen, and answered as one: 503 with Retry-After, at once.
    failures = agent.failures()
    assert failures, "no request met the restart"
    for took, response in failures:
        assert_unavailable(response)
        assert took < PROMPT_S
    # The same process, answering normally again by itself.
    assert server.proc.poll() is None
    assert agent.post_call(steps).status_code == 200


@pytest.mark.parametrize("fault, outage_s", [("blackhole", 30.0), ("refuse", 17.0)])
def test_an_unreachable_database_gets_503_promptly_and_the_server_recovers_by_itself(
    proxied: tuple[ToolOpsServer, Agent],
    pg_proxy: FaultProxy,
    shop: Shop,
    fault: str,
    outage_s: float,
) -> None:
    server, agent = proxied
    calls = {step: agent.until_done(step) for step in range(3)}
    getattr(pg_proxy, fault)()
    if fault == "refuse":
        pg_proxy.reset()
    ends = time.monotonic() + outage_s
    step = len(calls)
    while time.monotonic() < ends:  # the agent keeps calling: each call answered promptly
        took, response = time.monotonic(), agent.post_call(step)
        took = time.monotonic() - took
        assert_unavailable(response)
        assert took < PROMPT_S, f"answered after {took:.1f} s"
        step += 1
    pg_proxy.heal()
    healed = time.monotonic()
    # Every call refused during the outage, sent again as it was: done, once.
    calls[3] = agent.until_done(3, timeout=30)
    recovered_s = time.monotonic() - healed
    calls.update({s: agent.until_done(s) for s in range(4, step)})
    assert_each_effect_once(agent, shop, calls)
    # The same process, healed by itself within seconds, whatever the outage's length.
    assert server.proc.poll() is None
    assert recovered_s < 5, f"normal answers again {recovered_s:.1f} s after the heal"
    assert agent.post_call(step).status_code == 200


def test_the_api_and_the_pages_answer_503_with_retry_after_while_the_database_is_away(
    proxied: tuple[ToolOpsServer, Agent], pg_proxy: FaultProxy
) -> None:
    server, agent = proxied
    pg_proxy.refuse()
    pg_proxy.reset()
    assert_unavailable(agent.post_call(0))
    page = httpx.get(f"{server.url}/metrics", timeout=30)  # a page, not the API
    assert page.status_code == 503 and int(page.headers["Retry-After"]) >= 1
    assert page.headers["Content-Type"].startswith("text/html") and "database" in page.text
    pg_proxy.heal()
    assert agent.until_done(0, timeout=15)["status"] == "succeeded"
