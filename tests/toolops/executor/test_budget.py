"""Run budgets (API.md "Budget"): the executor never starts an attempt past max_attempts,
a call whose tokens take the run past max_tokens is counted but not sent, and once a
limit is reached the run is budget_exhausted and takes no more calls."""

from __future__ import annotations

import time
from typing import Any

from rest_framework.test import APIClient

from tests.conftest import Shop
from toolops.models import ToolCall

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
    time.sleep(0.4)

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
    time.sleep(0.4)

    run = get_run(api)

    assert run["status"] == "budget_exhausted"
    assert run["usage"]["seconds"] >= 0.3
