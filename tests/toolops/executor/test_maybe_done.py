"""A write retried under its Idempotency-Key whose every answer was lost. Each attempt is
safe to send again, but when the retries run out the write may well have been done: it
must not end `failed` (the effect would be neither known nor undone if the run is
abandoned). Its query tool settles it; without one it ends `unknown` for a person. A
write whose attempts were all provably refused still ends `failed`."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

from django.utils import timezone
from rest_framework.test import APIClient

from compensations.models import Compensation
from tests.conftest import Shop
from toolops.models import CircuitBreaker, IdempotencyRecord, Run, ToolCall
from toolops.tasks import sweep_stale_claims

from .helpers import SHOP, allow_without_approval, call_ok, start_run, tool_toml

STOCK = {"sku": "A12", "qty": 2}
RESERVATIONS = "/inventory/reservations"


def test_a_keyed_write_whose_answers_were_all_lost_ends_unknown_not_failed(
    api: APIClient, shop: Shop
) -> None:
    start_run(api)
    shop.fault(RESERVATIONS, drop_after_commit=3)

    call = call_ok(api, step_index=1, tool="reserve_stock", args=STOCK)

    # The shop did reserve (once: the key was honoured), so "failed" would be a lie.
    assert len(shop.state()["reservations"]) == 1
    assert len(shop.requests(RESERVATIONS)) == 3
    assert call["status"] == "unknown", call
    assert call["error"]["class"] == "unknown"
    assert "may have taken effect" in call["error"]["message"]
    row = ToolCall.objects.get(call_id=call["call_id"])
    assert row.status == ToolCall.Status.UNKNOWN


def test_a_keyed_write_refused_on_every_attempt_still_ends_failed(
    api: APIClient, shop: Shop
) -> None:
    start_run(api)
    shop.fault(RESERVATIONS, fail_next=3, fail_status=503)

    call = call_ok(api, step_index=1, tool="reserve_stock", args=STOCK)

    assert call["status"] == "failed", call
    assert shop.state()["reservations"] == []


def test_a_keyed_write_with_a_query_is_settled_by_it_and_its_undo_registered(
    api: APIClient, shop: Shop, catalog: Callable[[str], Path]
) -> None:
    catalog(
        tool_toml(
            name="create_order_keyed",
            kind="compensable_write",
            url=f"{SHOP}/orders",
            timeout_s=2.0,
            max_attempts=2,
            idempotency_header=True,
            query="query_order",
            client_reference="client_reference",
            requires_approval=False,
            compensation={"tool": "cancel_order", "args": {"order_id": "$.result.order_id"}},
            params_schema={"type": "object"},
        )
    )
    allow_without_approval("create_order_keyed")
    start_run(api)
    shop.fault("/orders", drop_after_commit=2)

    call = call_ok(
        api,
        step_index=1,
        tool="create_order_keyed",
        args={"sku": "A12", "qty": 1, "amount": "19.90"},
    )

    [order] = shop.state()["orders"]
    assert call["status"] == "succeeded", call
    assert call["result"]["order_id"] == order["order_id"]
    assert len(shop.requests("/orders/lookup")) == 1
    row = ToolCall.objects.get(call_id=call["call_id"])
    compensation = Compensation.objects.get(call=row)
    assert compensation.tool == "cancel_order"
    assert compensation.args == {"order_id": order["order_id"]}


def test_a_dead_holders_keyed_write_stopped_by_the_breaker_ends_unknown_not_failed(
    api: APIClient, shop: Shop
) -> None:
    # Its holder sent it (the shop reserved) and died before recording anything; when
    # the sweep resumes it, the tool's breaker is open: nothing can be sent to find out.
    start_run(api)
    run = Run.objects.get(run_id="r-1")
    key = "k" * 64
    call = ToolCall.objects.create(
        call_id="c-left",
        run=run,
        tool_call_id="tc-left",
        step_index=1,
        tool="reserve_stock",
        args=STOCK,
        args_digest="d",
        idempotency_key=key,
        client_reference="tops-" + "k" * 32,
        status="in_progress",
    )
    IdempotencyRecord.objects.create(
        key=key,
        call_ref=call.call_id,
        tool="reserve_stock",
        state="claimed",
        fence=1,
        lease_until=timezone.now() - timedelta(seconds=1),
        expires_at=timezone.now() + timedelta(days=7),
    )
    CircuitBreaker.objects.create(
        tool="reserve_stock", state="open", open_until=timezone.now() + timedelta(minutes=1)
    )

    assert sweep_stale_claims() == 1

    call.refresh_from_db()
    assert call.status == ToolCall.Status.UNKNOWN, (call.status, call.error_message)
    assert "may have taken effect" in call.error_message
    assert shop.requests(RESERVATIONS) == []  # nothing was sent into the open breaker
