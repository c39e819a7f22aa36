"""Unknown outcomes are reconciled with the tool's query tool: found → succeeded with what
the downstream holds; not found → the write is retried with the same client reference;
the query failing too → the call stays unknown and the model is told not to retry."""

from __future__ import annotations

from rest_framework.test import APIClient

from tests.conftest import Shop
from toolops.models import Attempt, ToolCall

from .helpers import allow_without_approval, call_ok, start_run

ORDER = {"sku": "A12", "qty": 1, "amount": "199.00"}


def test_it_settles_a_lost_order_response_with_the_order_the_query_finds(
    api: APIClient, shop: Shop
) -> None:
    allow_without_approval("create_order")
    start_run(api)
    shop.fault("/orders", drop_after_commit=1)

    call = call_ok(api, step_index=1, tool="create_order", args=ORDER)

    [order] = shop.state()["orders"]
    assert call["status"] == "succeeded", call
    assert call["error"] is None
    assert call["result"]["order_id"] == order["order_id"]
    assert call["result"]["client_reference"] == order["client_reference"]
    row = ToolCall.objects.get(call_id=call["call_id"])
    assert order["client_reference"] == row.client_reference
    # Found by the query: the order was not created a second time.
    assert len(shop.requests("/orders")) == 1
    [lookup] = shop.requests("/orders/lookup")
    assert lookup["body"]["client_reference"] == row.client_reference
    assert Attempt.objects.filter(call=row, purpose="reconcile").count() == 1

    again = call_ok(api, step_index=1, tool="create_order", args=ORDER)
    assert again["replayed"] is True
    assert again["result"]["order_id"] == order["order_id"]
    assert len(shop.requests("/orders")) == 1
    assert shop.state()["counts"]["orders"] == 1


def test_it_settles_a_charge_answered_502_after_the_commit_by_order_id(
    api: APIClient, shop: Shop
) -> None:
    allow_without_approval("charge")
    start_run(api)
    shop.fault("/payments/charges", commit_then_status=1, fail_status=502)

    call = call_ok(api, step_index=6, tool="charge", args={"order_id": "ord-5", "amount": "9.90"})

    [charge] = shop.state()["charges"]
    assert call["status"] == "succeeded", call
    assert call["result"]["charge_id"] == charge["charge_id"]
    assert len(shop.requests("/payments/charges")) == 1
    [lookup] = shop.requests("/payments/charges/lookup")
    assert lookup["body"]["order_id"] == "ord-5"


def test_it_retries_with_the_same_client_reference_when_the_query_finds_nothing(
    api: APIClient, shop: Shop
) -> None:
    # A short timeout, so the orders service's hang reads as a timeout quickly.
    allow_without_approval("create_order", timeout_s=0.5)
    start_run(api)
    shop.fault("/orders", timeout_next=1, hang_s=1)

    call = call_ok(api, step_index=1, tool="create_order", args=ORDER)

    assert call["status"] == "succeeded", call
    assert call["attempts"] == 2
    sent = shop.requests("/orders")
    assert len(sent) == 2
    row = ToolCall.objects.get(call_id=call["call_id"])
    assert [r["body"]["client_reference"] for r in sent] == [row.client_reference] * 2
    # The query ran between the two attempts and found nothing.
    [lookup] = shop.requests("/orders/lookup")
    assert sent[0]["at"] < lookup["at"] < sent[1]["at"]
    assert lookup["status"] == 404
    [order] = shop.state()["orders"]
    assert call["result"]["order_id"] == order["order_id"]


def test_it_stays_unknown_when_the_query_fails_too(api: APIClient, shop: Shop) -> None:
    allow_without_approval("create_order")
    start_run(api)
    shop.fault("/orders", drop_after_commit=1)
    shop.fault("/orders/lookup", fail_next=5, fail_status=500)

    call = call_ok(api, step_index=1, tool="create_order", args=ORDER)

    assert call["status"] == "unknown", call
    assert call["error"]["class"] == "unknown"
    assert call["result"] is None
    feedback = call["feedback"].lower()
    assert "do not retry" in feedback
    assert len(call["feedback"]) <= 400
    assert len(shop.requests("/orders")) == 1
    assert len(shop.requests("/orders/lookup")) >= 1
    assert shop.state()["counts"]["orders"] == 1
    assert ToolCall.objects.get().status == "unknown"

    again = call_ok(api, step_index=1, tool="create_order", args=ORDER)
    assert again["replayed"] is True
    assert again["status"] == "unknown"
    assert len(shop.requests("/orders")) == 1
    assert shop.state()["counts"]["orders"] == 1
