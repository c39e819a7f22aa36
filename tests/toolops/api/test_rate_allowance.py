"""The per-agent rate limit counted without Redis (toolops/api/allowance.py): each process
counts by itself and adds to the database every B requests; how far past the limit
several processes can go; no statement of its own on most requests."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from tests.toolops.api.helpers import assert_problem
from toolops.api import allowance, auth
from toolops.models import Agent, RateWindow
from toolops.services import agent_create

WINDOW = int(time.time() // 60)


@pytest.fixture(autouse=True)
def fresh_process() -> Iterator[None]:
    """Each test starts as a fresh process would: no counts held."""
    allowance.PROCESS.forget()
    yield
    allowance.PROCESS.forget()


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """auth's wall clock, 20 s into a minute, moved by the test (now[0])."""
    now = [float(WINDOW * 60 + 20)]
    monkeypatch.setattr(auth, "clock", lambda: now[0])
    return now


def client_for(token: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


def limited(limit: int | None, name: str = "limited") -> tuple[Agent, APIClient]:
    agent, token = agent_create(name=name, rate_limit_per_minute=limit)
    return agent, client_for(token)


def rate_statements(queries: CaptureQueriesContext) -> list[str]:
    return [q["sql"] for q in queries.captured_queries if "toolops_ratewindow" in q["sql"]]


def test_the_batch_is_a_fiftieth_of_the_limit_and_one_below_a_hundred() -> None:
    assert [allowance.batch_for(n) for n in (1, 49, 99, 100, 600, 6000)] == [1, 1, 1, 2, 12, 120]


@pytest.mark.django_db
def test_it_refuses_the_request_past_a_large_limit_with_retry_after(clock: list[float]) -> None:
    agent, client = limited(120)  # B = 2: most requests counted in the process only

    statuses = [client.get("/api/v1/runs/r-x").status_code for _ in range(120)]
    refused = client.get("/api/v1/runs/r-x")

    assert statuses == [404] * 120  # let in: the run does not exist
    assert_problem(refused, 429)
    assert refused["Retry-After"] == "40"  # the rest of the minute
    # The process alone holds the limit exactly; its 60 upserts added up every request.
    assert RateWindow.objects.get(agent=agent, window=WINDOW).count == 120
    clock[0] += 40  # the next minute: a fresh count
    assert client.get("/api/v1/runs/r-x").status_code == 404


@pytest.mark.django_db
def test_a_request_under_the_limit_makes_no_statement_of_its_own_on_most_requests(
    clock: list[float],
) -> None:
    _, capped = limited(600)  # B = 12
    _, free = limited(None, name="free")
    for client in (capped, free):  # the agent cached, last_used_at written
        client.get("/api/v1/runs/r-x")

    per_request = []
    for _ in range(24):
        with CaptureQueriesContext(connection) as queries:
            assert capped.get("/api/v1/runs/r-x").status_code == 404
        per_request.append((len(queries), len(rate_statements(queries))))
    with CaptureQueriesContext(connection) as unlimited:
        free.get("/api/v1/runs/r-x")

    plain = len(unlimited)
    # The first request counted one; the 11th and 23rd make the 12th and 24th: an upsert.
    upserts = [i for i, (_, rate) in enumerate(per_request) if rate]
    assert upserts == [10, 22]
    assert all(n == plain for i, (n, _) in enumerate(per_request) if i not in upserts)
    assert all(per_request[i] == (plain + 1, 1) for i in upserts)


@pytest.mark.django_db
@pytest.mark.parametrize("limit", [0, None])
def test_an_agent_without_a_limit_is_never_refused_and_counts_nothing(
    clock: list[float], limit: int | None
) -> None:
    agent = Agent.objects.create(name="free", token_hash="x", rate_limit_per_minute=limit)
    token = agent.set_new_token()
    agent.save()
    client = client_for(token)

    with CaptureQueriesContext(connection) as queries:
        statuses = {client.get("/api/v1/runs/r-x").status_code for _ in range(30)}

    assert statuses == {404}
    assert not rate_statements(queries)
    assert not RateWindow.objects.exists()
    assert agent.pk not in allowance.PROCESS.counting()


@pytest.mark.django_db(transaction=True)
def test_threads_of_one_process_hold_the_limit_exactly() -> None:
    agent, _ = agent_create(name="threads", rate_limit_per_minute=200)  # B = 4
    barrier = threading.Barrier(8)

    def burst(_: int) -> int:
        barrier.wait()
        try:
            return sum(
                allowance.PROCESS.admit(agent_id=agent.pk, limit=200, window=WINDOW)
                for _ in range(50)
            )
        finally:
            connection.close()

    with ThreadPoolExecutor(8) as pool:
        admitted = sum(pool.map(burst, range(8)))

    assert admitted == 200  # of 400
    assert RateWindow.objects.get(agent=agent).count >= 200


def bound(limit: int, processes: int) -> int:
    """The documented worst case (allowance.py): the limit + (N - 1)(B - 1)."""
    return limit + (processes - 1) * (allowance.batch_for(limit) - 1)


@pytest.mark.django_db
def test_processes_go_past_the_limit_by_at_most_the_documented_bound() -> None:
    # The worst order: each other process lets B - 1 in on a total it saw before the
    # limit was reached; one process then fills the window to the limit exactly.
    limit, batch = 600, 12
    agent, _ = agent_create(name="worst", rate_limit_per_minute=limit)
    processes = [allowance.Allowance() for _ in range(3)]

    def admit(process: allowance.Allowance) -> bool:
        return process.admit(agent_id=agent.pk, limit=limit, window=WINDOW)

    late = [admit(p) for p in processes[1:] for _ in range(batch - 1)]
    filled = [admit(processes[0]) for _ in range(limit)]
    after = [admit(p) for p in processes for _ in range(batch)]

    assert all(late) and all(filled)
    assert sum(late) + sum(filled) == bound(limit, 3) == 622
    assert not any(after)  # and then every process refuses


@pytest.mark.django_db
@pytest.mark.parametrize("limit,processes", [(5, 3), (99, 4), (150, 2), (600, 3), (1000, 5)])
def test_any_order_of_requests_stays_within_the_bound_and_reaches_the_limit(
    limit: int, processes: int
) -> None:
    agent, _ = agent_create(name="random", rate_limit_per_minute=limit)
    each = [allowance.Allowance() for _ in range(processes)]
    chooser = random.Random(limit * processes)

    admitted = sum(
        chooser.choice(each).admit(agent_id=agent.pk, limit=limit, window=WINDOW)
        for _ in range(2 * limit + 50)
    )

    assert limit <= admitted <= bound(limit, processes)
    if allowance.batch_for(limit) == 1:
        assert admitted == limit  # exact for a small limit
