"""Failure classes end to end, against the real demo shop: fatal failures are not retried,
harmless ones are retried with growing, jittered waits that honour Retry-After, and an
unsafe write whose outcome is unknown is sent exactly once and reported as unknown."""

from __future__ import annotations

import re
from typing import Any
from unittest.mock import patch

import pytest
from rest_framework.test import APIClient

from tests.conftest import Shop, free_port
from toolops.executor.keys import client_reference
from toolops.models import Attempt, IdempotencyRecord, ToolCall

from .helpers import (
    CHARGE_SCHEMA,
    STOCK_SCHEMA,
    allow_without_approval,
    call_ok,
    charge_noquery,
    start_run,
    tool_toml,
)

CHARGE = {"order_id": "ord-1", "amount": "25.00"}
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"


def arrivals(shop: Shop, path: str) -> list[float]:
    return [r["at"] for r in shop.requests(path)]


def gaps(times: list[float]) -> list[float]:
    return [b - a for a, b in zip(times, times[1:], strict=False)]


# -- unknown outcomes of an unsafe write: one request, never retried ---------------------


def test_it_leaves_a_timed_out_charge_unknown_after_one_request(
    api: APIClient, shop: Shop, catalog: Any
) -> None:
    catalog(charge_noquery(timeout_s=1.0))
    start_run(api)
    shop.fault("/payments/charges", timeout_next=1, hang_s=2)

    call = call_ok(api, step_index=0, tool="charge_noquery", args=CHARGE)

    assert call["status"] == "unknown"
    assert call["error"]["class"] == "unknown"
    assert call["error"]["reason"] == "timeout"
    assert call["result"] is None
    assert call["attempts"] == 1
    assert "do not retry" in call["feedback"].lower()
    assert len(call["feedback"]) <= 400
    assert len(shop.requests("/payments/charges")) == 1
    assert Attempt.objects.filter(call__call_id=call["call_id"]).count() == 1

    again = call_ok(api, step_index=0, tool="charge_noquery", args=CHARGE)
    assert again["replayed"] is True
    assert again["call_id"] == call["call_id"]
    assert again["status"] == "unknown"
    assert len(shop.requests("/payments/charges")) == 1


@pytest.mark.parametrize(
    "fault",
    [
        {"commit_then_status": 1, "fail_status": 502},
        {"commit_then_status": 1, "fail_status": 500},
        {"commit_then_status": 1, "fail_status": 504},
        {"drop_after_commit": 1},
    ],
    ids=["502", "500", "504", "reset"],
)
def test_it_leaves_a_charge_unknown_when_the_answer_is_lost_after_the_commit(
    api: APIClient, shop: Shop, catalog: Any, fault: dict[str, Any]
) -> None:
    catalog(charge_noquery())
    start_run(api)
    shop.fault("/payments/charges", **fault)

    call = call_ok(api, step_index=0, tool="charge_noquery", args=CHARGE)

    assert call["status"] == "unknown", call
    assert call["error"]["class"] == "unknown"
    assert call["error"]["reason"] == "downstream_error"
    assert "do not retry" in call["feedback"].lower()
    # The shop did charge; ToolOps must not have charged a second time.
    assert len(shop.requests("/payments/charges")) == 1
    assert shop.state()["counts"]["charges"] == 1
    assert ToolCall.objects.get().status == "unknown"


# -- retries: reads, and answers that prove nothing was done -----------------------------


def test_it_retries_a_read_on_503_with_growing_waits(api: APIClient, shop: Shop) -> None:
    start_run(api)
    shop.fault("/inventory/stock", fail_next=2, fail_status=503)

    # Full jitter at its ceiling: the waits are the backoff ceilings themselves.
    with patch(
        "toolops.executor.backoff.random.uniform", autospec=True, side_effect=lambda a, b: b
    ):
        call = call_ok(api, step_index=0, tool="query_stock", args={"sku": "A12"})

    assert call["status"] == "succeeded"
    assert call["attempts"] == 3
    assert call["result"] == {"sku": "A12", "available": 50}
    times = arrivals(shop, "/inventory/stock")
    assert len(times) == 3
    first_gap, second_gap = gaps(times)
    assert first_gap >= 0.2  # the catalog's default backoff base
    assert second_gap >= 0.4
    assert second_gap > first_gap
    rows = list(Attempt.objects.filter(call__call_id=call["call_id"]).order_by("number"))
    assert [r.http_status for r in rows] == [503, 503, 200]
    assert rows[2].waited_ms > rows[1].waited_ms > 0


def test_it_waits_at_least_retry_after_before_the_next_attempt(api: APIClient, shop: Shop) -> None:
    start_run(api)
    shop.fault("/inventory/stock", burst_429=1, retry_after=1)

    call = call_ok(api, step_index=0, tool="query_stock", args={"sku": "A12"})

    assert call["status"] == "succeeded"
    assert call["attempts"] == 2
    [gap] = gaps(arrivals(shop, "/inventory/stock"))
    assert gap >= 1.0


@pytest.mark.parametrize(
    "fault",
    [{"burst_429": 1, "retry_after": 0}, {"fail_next": 1, "fail_status": 503}],
    ids=["429", "503"],
)
def test_it_retries_an_unsafe_write_when_the_answer_proves_nothing_was_done(
    api: APIClient, shop: Shop, catalog: Any, fault: dict[str, Any]
) -> None:
    catalog(charge_noquery())
    start_run(api)
    shop.fault("/payments/charges", **fault)

    call = call_ok(api, step_index=0, tool="charge_noquery", args=CHARGE)

    assert call["status"] == "succeeded"
    assert call["attempts"] == 2
    assert len(shop.requests("/payments/charges")) == 2
    assert shop.state()["counts"]["charges"] == 1


def test_it_retries_a_timed_out_read(api: APIClient, shop: Shop, catalog: Any) -> None:
    catalog(
        tool_toml(
            name="stock_fast",
            kind="read",
            url="{shop}/inventory/stock",
            timeout_s=0.5,
            params_schema=STOCK_SCHEMA,
        )
    )
    start_run(api)
    shop.fault("/inventory/stock", timeout_next=1, hang_s=1)

    call = call_ok(api, step_index=0, tool="stock_fast", args={"sku": "B7"})

    assert call["status"] == "succeeded"
    assert call["attempts"] == 2
    assert call["result"]["available"] == 5
    assert len(shop.requests("/inventory/stock")) == 2


# -- fatal: retrying cannot help -----------------------------------------------------------


def test_it_fails_a_404_at_once_without_retrying(api: APIClient, shop: Shop) -> None:
    start_run(api)

    call = call_ok(api, step_index=0, tool="reserve_stock", args={"sku": "NOPE", "qty": 1})

    assert call["status"] == "failed"
    assert call["error"]["class"] == "fatal"
    assert call["error"]["reason"] == "downstream_error"
    assert call["attempts"] == 1
    assert call["feedback"]
    assert len(shop.requests("/inventory/reservations")) == 1
    assert shop.state()["counts"]["reservations"] == 0


def test_it_fails_a_400_at_once_without_retrying(api: APIClient, shop: Shop, catalog: Any) -> None:
    catalog(charge_noquery())
    start_run(api)

    # The args pass the tool's schema; the shop refuses a negative amount with 400.
    call = call_ok(api, step_index=0, tool="charge_noquery", args={**CHARGE, "amount": "-5"})

    assert call["status"] == "failed"
    assert call["error"]["class"] == "fatal"
    assert call["attempts"] == 1
    assert len(shop.requests("/payments/charges")) == 1
    assert shop.state()["counts"]["charges"] == 0


@pytest.mark.parametrize("kind", ["read", "irreversible"])
def test_it_retries_a_refused_connection_up_to_max_attempts(
    api: APIClient, shop: Shop, catalog: Any, kind: str
) -> None:
    # Nobody listens on this port: the request provably never left, so any tool may retry.
    catalog(
        tool_toml(
            name="nowhere",
            kind=kind,
            url=f"http://127.0.0.1:{free_port()}/x",
            max_attempts=3,
            backoff_base_s=0.01,
            requires_approval=False,
            params_schema=CHARGE_SCHEMA,
        )
    )
    start_run(api)

    call = call_ok(api, step_index=0, tool="nowhere", args=CHARGE)

    assert call["status"] == "failed"
    assert call["error"]["class"] == "retry"
    assert call["attempts"] == 3
    rows = Attempt.objects.filter(call__call_id=call["call_id"])
    assert rows.count() == 3
    assert {r.http_status for r in rows} == {None}
    assert shop.requests() == []


# -- what the downstream receives --------------------------------------------------------


def test_it_sends_tracing_and_idempotency_headers_on_every_attempt(
    api: APIClient, shop: Shop
) -> None:
    start_run(api, trace_id=TRACE_ID)
    shop.fault("/inventory/stock", fail_next=2, fail_status=503)

    call = call_ok(api, step_index=4, tool="query_stock", args={"sku": "A12"}, tool_call_id="tc-7")

    assert call["attempts"] == 3
    headers = [r["headers"] for r in shop.requests("/inventory/stock")]
    assert [h["x-toolops-attempt"] for h in headers] == ["1", "2", "3"]
    assert {h["x-toolops-run-id"] for h in headers} == {"r-1"}
    assert {h["x-toolops-tool-call-id"] for h in headers} == {"tc-7"}
    keys = {h["idempotency-key"] for h in headers}
    assert len(keys) == 1
    assert re.fullmatch(r"[0-9a-f]{64}", keys.pop() or "")
    parents = []
    for h in headers:
        match = re.fullmatch(rf"00-{TRACE_ID}-([0-9a-f]{{16}})-01", h["traceparent"] or "")
        assert match, h["traceparent"]
        parents.append(match.group(1))
    # Each attempt is its own span: a different parent id on every request.
    assert len(set(parents)) == 3
    spans = Attempt.objects.filter(call__call_id=call["call_id"]).order_by("number")
    assert [a.span_id for a in spans] == parents


def test_it_sends_a_client_reference_derived_from_the_key_on_every_attempt(
    api: APIClient, shop: Shop
) -> None:
    allow_without_approval("create_order")
    start_run(api)
    shop.fault("/orders", fail_next=1, fail_status=503)
    order = {"sku": "A12", "qty": 1, "amount": "199.00"}

    call = call_ok(api, step_index=2, tool="create_order", args=order)
    again = call_ok(api, step_index=2, tool="create_order", args=order)
    other_step = call_ok(api, step_index=3, tool="create_order", args=order)

    assert call["status"] == "succeeded"
    assert call["attempts"] == 2
    assert again["replayed"] is True
    sent = shop.requests("/orders")
    assert len(sent) == 3  # two attempts of step 2 (the replay sent nothing), one of step 3
    row = ToolCall.objects.get(call_id=call["call_id"])
    assert row.client_reference == client_reference(row.idempotency_key)
    assert [r["body"]["client_reference"] for r in sent[:2]] == [row.client_reference] * 2
    assert [r["headers"]["idempotency-key"] for r in sent[:2]] == [row.idempotency_key] * 2
    assert call["result"]["client_reference"] == row.client_reference
    assert sent[2]["body"]["client_reference"] != row.client_reference
    assert other_step["result"]["order_id"] != call["result"]["order_id"]
    assert IdempotencyRecord.objects.count() == 2
