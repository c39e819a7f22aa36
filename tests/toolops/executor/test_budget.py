"""Run budgets (API.md "Budget"): the executor never starts an attempt past max_attempts,
a call whose tokens take the run past max_tokens is counted but not sent, and once a
limit is reached the run is budget_exhausted and takes no more calls."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from tests.conftest import Shop
from tests.waiting import wait_until
from toolops.executor import breaker
from toolops.models import Run, ToolCall

from .helpers import call_ok, get_run, post_call, start_run

STOCK = {"sku": "A12"}


def assert_refused(api: APIClient, shop: Shop, **body: Any) -> None:
    """A call on a run that is not running answers 409 and sends nothing."""
    sent_before = len(shop.requests())
    calls_before = ToolCall.objects.count()

    response = post_call(api, **body)

    assert response.status_code == 409, response.content
    problem = response.json()
    assert problem["status"] == 409
    assert problem["title"]
    assert problem["detail"]
    assert len(shop.requests()) == sent_before
    assert ToolCall.objects.count() == calls_before


def test_it_never_starts_an_attempt_past_max_attempts(api: APIClient, shop: Shop) -> None:
    start_run(api, budget={"max_attempts": 2})
    shop.fault("/inventory/stock", fail_next=10, fail_status=503)

    call = call_ok(api, step_index=0, tool="query_stock", args=STOCK)

    assert call["status"] == "failed"
    assert call["error"]["reason"] == "budget_exhausted"
    assert call["attempts"] == 2
    assert call["feedback"]
    assert len(shop.requests()) == 2
    run = get_run(api)
    assert run["status"] == "budget_exhausted"
    assert run["budget"] == {"max_attempts": 2, "max_seconds": None, "max_tokens": None}
    assert run["usage"]["attempts"] == 2
    assert run["summary"].startswith("Based on partial data")

    assert_refused(api, shop, step_index=1, tool="query_stock", args=STOCK)


def test_it_exhausts_the_run_when_the_last_allowed_attempt_succeeds(
    api: APIClient, shop: Shop
) -> None:
    start_run(api, budget={"max_attempts": 2})

    first = call_ok(api, step_index=0, tool="query_stock", args=STOCK)
    second = call_ok(api, step_index=1, tool="query_stock", args={"sku": "B7"})

    assert [first["status"], second["status"]] == ["succeeded", "succeeded"]
    run = get_run(api)
    assert run["usage"]["attempts"] == 2
    assert run["status"] == "budget_exhausted"
    assert_refused(api, shop, step_index=2, tool="query_stock", args=STOCK)


def test_it_counts_but_does_not_send_a_call_whose_tokens_pass_max_tokens(
    api: APIClient, shop: Shop
) -> None:
    start_run(api, budget={"max_tokens": 100})

    call = call_ok(api, step_index=0, tool="query_stock", args=STOCK, tokens=150)

    assert call["status"] == "failed"
    assert call["error"]["reason"] == "budget_exhausted"
    assert call["attempts"] == 0
    assert shop.requests() == []
    run = get_run(api)
    assert run["status"] == "budget_exhausted"
    assert run["usage"]["tokens"] == 150
    assert run["usage"]["attempts"] == 0

    assert_refused(api, shop, step_index=1, tool="query_stock", args=STOCK)


def test_it_executes_a_call_that_reaches_max_tokens_exactly_and_then_stops(
    api: APIClient, shop: Shop
) -> None:
    start_run(api, budget={"max_tokens": 100})

    call = call_ok(api, step_index=0, tool="query_stock", args=STOCK, tokens=100)

    assert call["status"] == "succeeded"
    assert len(shop.requests("/inventory/stock")) == 1
    run = get_run(api)
    assert run["status"] == "budget_exhausted"
    assert run["usage"]["tokens"] == 100

    assert_refused(api, shop, step_index=1, tool="query_stock", args=STOCK, tokens=0)


def test_it_counts_tokens_once_when_a_call_is_replayed(api: APIClient, shop: Shop) -> None:
    start_run(api, budget={"max_tokens": 1000})
    reserve = {"step_index": 0, "tool": "reserve_stock", "args": {"sku": "D9", "qty": 1}}

    first = call_ok(api, **reserve, tokens=300)
    replay = call_ok(api, **reserve, tokens=300)
    by_id = call_ok(api, **reserve, tokens=300, tool_call_id=first["tool_call_id"])

    assert replay["replayed"] is True
    assert by_id["replayed"] is True
    assert len(shop.requests("/inventory/reservations")) == 1
    assert get_run(api)["usage"]["tokens"] == 300


def test_it_counts_tokens_without_a_token_limit(api: APIClient, shop: Shop) -> None:
    start_run(api)

    call_ok(api, step_index=0, tool="query_stock", args=STOCK, tokens=40)
    call_ok(api, step_index=1, tool="query_stock", args={"sku": "nope"}, tokens=2)

    run = get_run(api)
    assert run["usage"]["tokens"] == 42
    assert run["usage"]["attempts"] == 2
    assert run["status"] == "running"


def test_it_refuses_calls_once_max_seconds_have_passed(api: APIClient, shop: Shop) -> None:
    start_run(api, budget={"max_seconds": 0.3})
    wait_until(lambda: Run.objects.get(run_id="r-1").seconds_used() > 0.3)

    assert_refused(api, shop, step_index=0, tool="query_stock", args=STOCK)

    run = get_run(api)
    assert run["status"] == "budget_exhausted"
    assert run["usage"]["seconds"] >= 0.3


def test_it_shows_the_run_exhausted_as_soon_as_max_seconds_have_passed(
    api: APIClient, shop: Shop
) -> None:
    # "The moment a limit is reached the run becomes budget_exhausted": an agent that only
    # reads the run must not be told it is still running.
    start_run(api, budget={"max_seconds": 0.3})
    wait_until(lambda: Run.objects.get(run_id="r-1").seconds_used() > 0.3)

    run = get_run(api)

    assert run["status"] == "budget_exhausted"
    assert run["usage"]["seconds"] >= 0.3


RESERVE = {"sku": "A12", "qty": 1}


def test_a_write_in_a_limited_run_costs_no_statement_more_than_in_an_unlimited_one(
    api: APIClient, shop: Shop, settings: Any
) -> None:
    settings.TOOLOPS_POLICY_CACHE_S = 60  # as deployed: policies are cached per process

    def statements_of_a_write(run_id: str, **run: Any) -> list[str]:
        start_run(api, run_id=run_id, **run)
        call_ok(api, run_id=run_id, step_index=0, tool="query_stock", args=STOCK)  # warm
        with CaptureQueriesContext(connection) as ctx:
            call = call_ok(
                api, run_id=run_id, step_index=1, tool="reserve_stock", args=RESERVE, tokens=50
            )
        assert call["status"] == "succeeded"
        # The savepoints are the test's own transaction around the claim
        # (executor/statements/claim.py).
        return [
            q["sql"] for q in ctx.captured_queries if "SAVEPOINT" not in q["sql"].split(" ", 2)[:2]
        ]

    free = statements_of_a_write("r-free")
    limited = statements_of_a_write(
        "r-limited", budget={"max_attempts": 50, "max_seconds": 3600, "max_tokens": 10_000}
    )

    if connection.vendor == "postgresql":
        assert len(limited) == len(free) == 3, "\n".join(s[:160] for s in limited)
        assert not any(s.strip().upper() in ("BEGIN", "COMMIT") for s in limited)
        # The claim reserves the attempt and counts the tokens; a call that kept to its
        # first attempt and reached no limit leaves the run row alone at its record.
        assert "toolops_run" in limited[1] and "toolops_run" not in limited[2]
    run = get_run(api, run_id="r-limited")
    assert run["usage"]["attempts"] == 2 and run["usage"]["tokens"] == 50
    assert run["status"] == "running"


def test_a_write_with_no_attempt_left_is_not_sent_and_ends_the_run(
    api: APIClient, shop: Shop
) -> None:
    start_run(api, budget={"max_attempts": 1})
    call_ok(api, step_index=0, tool="query_stock", args=STOCK)
    # The read took the last attempt: the run ended with it.
    assert get_run(api)["status"] == "budget_exhausted"
    assert_refused(api, shop, step_index=1, tool="reserve_stock", args=RESERVE)

    start_run(api, run_id="r-2", budget={"max_attempts": 2})
    shop.fault("/inventory/reservations", fail_next=5, fail_status=503)
    call = call_ok(api, run_id="r-2", step_index=0, tool="reserve_stock", args=RESERVE)
    assert (call["status"], call["error"]["reason"], call["attempts"]) == (
        "failed",
        "budget_exhausted",
        2,
    )
    assert len(shop.requests("/inventory/reservations")) == 2
    run = get_run(api, run_id="r-2")
    assert (run["status"], run["usage"]["attempts"]) == ("budget_exhausted", 2)


def test_a_write_whose_tokens_pass_max_tokens_is_counted_but_not_sent(
    api: APIClient, shop: Shop
) -> None:
    start_run(api, budget={"max_tokens": 100, "max_attempts": 10})

    call = call_ok(api, step_index=0, tool="reserve_stock", args=RESERVE, tokens=150)

    assert (call["status"], call["error"]["reason"], call["attempts"]) == (
        "failed",
        "budget_exhausted",
        0,
    )
    assert shop.requests() == []
    run = get_run(api)
    assert (run["status"], run["usage"]["tokens"], run["usage"]["attempts"]) == (
        "budget_exhausted",
        150,
        0,
    )


def test_a_write_that_sends_nothing_gives_its_reserved_attempt_back(
    api: APIClient, shop: Shop
) -> None:
    start_run(api, budget={"max_attempts": 5})
    breaker.breaker_force_open(tool="reserve_stock", seconds=60, reason="maintenance")

    call = call_ok(api, step_index=0, tool="reserve_stock", args=RESERVE, tokens=7)

    assert call["status"] == "failed" and call["error"]["reason"] == "circuit_open"
    assert shop.requests() == []
    run = get_run(api)
    assert (run["usage"]["attempts"], run["usage"]["tokens"]) == (0, 7)


def test_concurrent_writes_of_one_run_never_overspend_its_attempts(
    toolops_server: Any, agent_a: tuple[Any, str], shop: Shop
) -> None:
    server = toolops_server()
    headers = {"Authorization": f"Bearer {agent_a[1]}"}
    with httpx.Client(base_url=f"{server.url}/api/v1", headers=headers, timeout=30) as http:
        budget = {"max_attempts": 3, "max_tokens": 1000}
        assert http.post("/runs", json={"run_id": "r-c", "budget": budget}).status_code == 201

        def write(step: int) -> dict[str, Any]:
            body = {"step_index": step, "tool": "reserve_stock", "tokens": 10, "args": RESERVE}
            return http.post("/runs/r-c/calls", json=body).json()

        with ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(write, range(8)))
        run = http.get("/runs/r-c").json()

    sent = [a for a in answers if a.get("status") == "succeeded"]
    assert len(sent) == 3 == len(shop.requests("/inventory/reservations"))
    # The others were refused (the run had ended) or counted but not sent.
    assert all(a.get("status") != "succeeded" for a in answers if a not in sent)
    assert (run["status"], run["usage"]["attempts"]) == ("budget_exhausted", 3)


def test_a_write_that_takes_the_last_attempt_or_token_ends_the_run(
    api: APIClient, shop: Shop
) -> None:
    start_run(api, budget={"max_attempts": 2})
    call_ok(api, step_index=0, tool="reserve_stock", args=RESERVE)
    assert get_run(api)["status"] == "running"
    last = call_ok(api, step_index=1, tool="reserve_stock", args={"sku": "A12", "qty": 2})
    assert last["status"] == "succeeded"
    assert (get_run(api)["status"], get_run(api)["usage"]["attempts"]) == ("budget_exhausted", 2)

    start_run(api, run_id="r-t", budget={"max_tokens": 100})
    call_ok(api, run_id="r-t", step_index=0, tool="reserve_stock", args=RESERVE, tokens=60)
    assert get_run(api, run_id="r-t")["status"] == "running"
    call_ok(api, run_id="r-t", step_index=1, tool="reserve_stock", args=RESERVE, tokens=40)
    run = get_run(api, run_id="r-t")
    assert (run["status"], run["usage"]["tokens"]) == ("budget_exhausted", 100)
    assert len(shop.requests("/inventory/reservations")) == 4
