"""The agent policy across real web processes (API.md "Agent policy"): limits hold when
fifty calls race over three uvicorn processes on one PostgreSQL — never more than `max`
pass, and the shop sees exactly those — and an apply is in force on every process within
2 s."""

from __future__ import annotations

import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from tests.conftest import Shop, ToolOpsServer
from tests.toolops.policy.flow import CHARGES_RUN, money, units
from tests.toolops.policy.helpers import apply_policy
from tests.waiting import wait_until
from toolops.models import ToolCall

# The servers read what the test process commits.
pytestmark = pytest.mark.django_db(transaction=True)

CALLERS = 50
WEBS = 3
SERVER_ENV = {
    # As deployed: the catalog's per-tool overrides are cached per process; the agent
    # policy must not wait for that cache.
    "TOOLOPS_POLICY_CACHE_S": "5",
    # All fifty at once from one agent, even where REDIS_URL counts them across processes.
    "TOOLOPS_AGENT_MAX_INFLIGHT": str(2 * CALLERS),
}


def start_webs(toolops_server: Any) -> list[ToolOpsServer]:
    """WEBS web processes, started side by side (each takes seconds to boot)."""
    with ThreadPoolExecutor(WEBS) as pool:
        return list(pool.map(lambda _: toolops_server(**SERVER_ENV), range(WEBS)))


def create_run(url: str, token: str, run_id: str) -> None:
    response = httpx.post(
        f"{url}/api/v1/runs",
        json={"run_id": run_id},
        headers={"Authorization": f"Bearer {token}"},
        timeout=10,
    )
    assert response.status_code == 201, response.text


def fire(urls: list[str], token: str, run_id: str, bodies: list[dict[str, Any]]) -> list[Any]:
    """Post every body at once, spread over the processes in turn; their answers."""
    barrier = threading.Barrier(len(bodies))
    limits = httpx.Limits(max_connections=len(bodies), max_keepalive_connections=len(bodies))
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(headers=headers, timeout=60, limits=limits) as client:

        def one(n: int) -> Any:
            url = f"{urls[n % len(urls)]}/api/v1/runs/{run_id}/calls"
            barrier.wait()
            response = client.post(url, json=bodies[n])
            assert response.status_code == 200, response.text
            return response.json()

        with ThreadPoolExecutor(len(bodies)) as pool:
            return list(pool.map(one, range(len(bodies))))


@dataclass(frozen=True)
class Race:
    policy: str
    limit: str
    tool: str
    path: str  # the shop's endpoint the tool posts to
    passes: int  # how many calls fit under max
    spent: int  # the counter after the race, in units

    def args(self, n: int) -> dict[str, Any]:
        if self.tool == "charge":
            return {"order_id": f"o-{n}", "amount": "10.00", "currency": "EUR"}
        return {"sku": "A12", "qty": 1}


RACES = {
    "count": Race(
        policy="""
        [[limit]]
        name = "reservations per day"
        agents = ["*"]
        tools = ["reserve_stock"]
        max = 7
        per = "day"
        """,
        limit="reservations per day",
        tool="reserve_stock",
        path="/inventory/reservations",
        passes=7,
        spent=7,
    ),
    "sum": Race(
        policy="""
        [[limit]]
        name = "charges per day"
        agents = ["*"]
        tools = ["charge"]
        sum = "amount"
        max = "100.00"
        per = "day"
        """
        + CHARGES_RUN,
        limit="charges per day",
        tool="charge",
        path="/payments/charges",
        passes=10,
        spent=money("100.00"),
    ),
}


@pytest.mark.parametrize("race", RACES.values(), ids=RACES.keys())
def test_it_never_lets_more_than_max_through_when_calls_race_over_processes(
    toolops_server: Any, agent_a: Any, shop: Shop, race: Race
) -> None:
    version = apply_policy(race.policy)
    webs = start_webs(toolops_server)
    token = agent_a[1]
    create_run(webs[0].url, token, "r-race")
    # Admitted calls stay in flight a while, so later ones race them, not follow them.
    shop.fault(race.path, latency_ms=100)
    bodies = [{"step_index": n, "tool": race.tool, "args": race.args(n)} for n in range(CALLERS)]

    answers = fire([w.url for w in webs], token, "r-race", bodies)

    outcomes = Counter((a["status"], (a["error"] or {}).get("reason")) for a in answers)
    assert outcomes == {
        ("succeeded", None): race.passes,
        ("failed", "spend_limit"): CALLERS - race.passes,
    }, outcomes
    assert {a["policy"]["version"] for a in answers} == {version.number}
    refused = [a for a in answers if a["status"] == "failed"]
    assert all(race.limit in a["policy"]["rules"] for a in refused)
    assert len(shop.requests(race.path)) == race.passes
    assert units(race.limit) == race.spent
    calls = ToolCall.objects.filter(run__run_id="r-race")
    assert calls.count() == CALLERS
    # They raced: calls were refused while admitted ones were still at the shop, so the
    # count came from the reservations, not from calls that had ended.
    last_done = max(c.finished_at for c in calls if c.status == "succeeded")
    assert any(c.created_at < last_done for c in calls if c.status == "failed")


def refuses(url: str, token: str, step: int) -> bool:
    """Whether this process refuses reserve_stock as not granted (a new call each time)."""
    response = httpx.post(
        f"{url}/api/v1/runs/r-apply/calls",
        json={"step_index": step, "tool": "reserve_stock", "args": {"sku": "A12", "qty": 1}},
        headers={"Authorization": f"Bearer {token}"},
        timeout=10,
    )
    assert response.status_code == 200, response.text
    answer = response.json()
    return answer["status"] == "failed" and answer["error"]["reason"] == "not_permitted"


def test_it_applies_a_policy_on_every_process_within_two_seconds(
    toolops_server: Any, agent_a: Any, shop: Shop
) -> None:
    allowed = apply_policy('default = "allow"')
    webs = start_webs(toolops_server)
    token = agent_a[1]
    create_run(webs[0].url, token, "r-apply")
    steps = iter(range(10_000))
    # Every process has compiled the allowing version, and uses it.
    for web in webs:
        assert not refuses(web.url, token, next(steps))
    assert set(ToolCall.objects.values_list("policy_version", flat=True)) == {allowed.number}
    waiting = {web.url for web in webs}

    def all_refuse() -> bool:
        for url in sorted(waiting):
            if refuses(url, token, next(steps)):
                waiting.discard(url)
        return not waiting

    began = time.monotonic()
    denying = apply_policy(
        """
        default = "deny"
        [[grant]]
        agents = ["agent-a"]
        tools = ["query_stock"]
        """
    )
    wait_until(all_refuse, 2.0, every=0.05, failure=lambda: f"still allowing: {waiting}")

    assert time.monotonic() - began < 2.0
    last = ToolCall.objects.order_by("-step_index")[:WEBS]
    assert {c.policy_version for c in last} == {denying.number}
    assert shop.requests("/inventory/reservations") and all(
        r["status"] < 300 for r in shop.requests("/inventory/reservations")
    )
