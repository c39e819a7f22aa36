"""Unknown outcomes that the request could not settle: the worker asks the query tool
again (`reconcile_unknown_calls`, with backoff per call, until RECONCILE_MAX_ATTEMPTS),
and a person can settle one by hand (`call_settle`). Neither ever re-sends the write."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone
from rest_framework.test import APIClient

from tests.conftest import Shop
from tests.waiting import wait_until
from toolops.executor import breaker, settle
from toolops.executor.settle import RECONCILE_MAX_ATTEMPTS, call_reconcile, call_settle
from toolops.models import Attempt, CircuitBreaker, ToolCall
from toolops.tasks import reconcile_unknown_calls

from .helpers import allow_without_approval, call_ok, charge_noquery, start_run

ORDER = {"sku": "A12", "qty": 1, "amount": "199.00"}
CHARGE_ARGS = {"order_id": "ord-9", "amount": "20.00"}
# How the orders service loses the answer, and whether the order was made first.
COMMITTED = {
    # The order commits, then the service hangs past ToolOps' 0.5 s timeout.
    "hang_after_commit": {"hang_after_commit_s": 1.5},
    # The order commits, then the connection is reset.
    "drop_after_commit": {"drop_after_commit": 1},
}


def lookups_fail(shop: Shop, path: str = "/orders/lookup") -> None:
    shop.fault(path, fail_next=10_000, fail_status=500)


def make_due(call_id: str) -> None:
    """The worker's next look is due now (instead of waiting out the backoff)."""
    ToolCall.objects.filter(call_id=call_id).update(
        next_reconcile_at=timezone.now() - timedelta(seconds=1)
    )


def unknown_order(api: APIClient, shop: Shop, **orders_fault: Any) -> dict[str, Any]:
    """create_order whose answer is lost while query_order fails too: left unknown."""
    allow_without_approval("create_order", timeout_s=0.5)
    start_run(api)
    shop.fault("/orders", **orders_fault)
    lookups_fail(shop)
    call = call_ok(api, step_index=1, tool="create_order", args=ORDER)
    assert call["status"] == "unknown", call
    return call


def assert_left_unknown_for_the_worker(call: dict[str, Any], reason: str) -> ToolCall:
    assert call["error"]["class"] == "unknown"
    assert call["error"]["reason"] == reason
    assert call["result"] is None
    assert call["finished_at"] is None
    assert "do not retry" in call["feedback"].lower()
    assert "query_order" in call["feedback"]
    row = ToolCall.objects.get(call_id=call["call_id"])
    assert row.status == "unknown"
    assert row.next_reconcile_at is not None
    assert row.next_reconcile_at > timezone.now()
    assert row.reconcile_attempts == 0
    return row


# -- the worker settles what the request could not -------------------------------------


def test_it_fails_a_timed_out_order_that_the_query_later_finds_did_not_take_effect(
    api: APIClient, shop: Shop
) -> None:
    # timeout_next hangs WITHOUT creating the order.
    call = unknown_order(api, shop, timeout_next=1, hang_s=1)
    row = assert_left_unknown_for_the_worker(call, reason="timeout")
    assert shop.state()["counts"]["orders"] == 0
    shop.fault("/orders")
    shop.fault("/orders/lookup")
    lookups_before = len(shop.requests("/orders/lookup"))
    make_due(call["call_id"])

    assert reconcile_unknown_calls() == 1

    row.refresh_from_db()
    assert row.status == "failed"
    assert "did not take effect" in row.error_message
    assert "did not take effect" in row.feedback
    assert row.result is None
    assert row.finished_at is not None
    assert row.next_reconcile_at is None
    # The worker looked once, by the call's client reference, and did not re-send the order.
    lookups = shop.requests("/orders/lookup")[lookups_before:]
    assert [(r["body"]["client_reference"], r["status"]) for r in lookups] == [
        (row.client_reference, 404)
    ]
    assert len(shop.requests("/orders")) == 1
    assert shop.state()["counts"]["orders"] == 0
    assert Attempt.objects.filter(call=row, purpose="reconcile", http_status=404).count() == 1

    answer = api.get(f"/api/v1/calls/{call['call_id']}").json()
    assert answer["status"] == "failed"
    assert "did not take effect" in answer["feedback"]
    again = call_ok(api, step_index=1, tool="create_order", args=ORDER)
    assert again["replayed"] is True
    assert again["call_id"] == call["call_id"]
    assert again["status"] == "failed"
    assert len(shop.requests("/orders")) == 1
    # Settled: a later sweep has nothing to ask.
    assert reconcile_unknown_calls() == 0
    assert len(shop.requests("/orders/lookup")) == lookups_before + 1


@pytest.mark.parametrize("fault", COMMITTED.values(), ids=COMMITTED.keys())
def test_it_succeeds_a_lost_order_that_the_query_later_finds(
    api: APIClient, shop: Shop, fault: dict[str, Any]
) -> None:
    call = unknown_order(api, shop, **fault)
    reason = "timeout" if "hang_after_commit_s" in fault else "downstream_error"
    row = assert_left_unknown_for_the_worker(call, reason=reason)
    [order] = shop.state()["orders"]
    shop.fault("/orders")
    shop.fault("/orders/lookup")
    lookups_before = len(shop.requests("/orders/lookup"))

    # Not due yet: the sweep leaves it alone and asks nothing.
    assert reconcile_unknown_calls() == 0
    assert len(shop.requests("/orders/lookup")) == lookups_before
    assert ToolCall.objects.get(pk=row.pk).status == "unknown"

    make_due(call["call_id"])
    assert reconcile_unknown_calls() == 1

    row.refresh_from_db()
    assert row.status == "succeeded"
    assert row.result["order_id"] == order["order_id"]
    assert row.result["client_reference"] == row.client_reference
    assert row.error_class == "" and row.error_reason == "" and row.error_message == ""
    assert "do not call it again" in row.feedback.lower()
    assert row.finished_at is not None
    assert row.next_reconcile_at is None
    assert len(shop.requests("/orders")) == 1
    assert shop.state()["counts"]["orders"] == 1
    [lookup] = shop.requests("/orders/lookup")[lookups_before:]
    assert lookup["body"]["client_reference"] == row.client_reference
    assert lookup["status"] == 200

    again = call_ok(api, step_index=1, tool="create_order", args=ORDER)
    assert again["replayed"] is True
    assert again["call_id"] == call["call_id"]
    assert again["status"] == "succeeded"
    assert again["result"]["order_id"] == order["order_id"]
    assert again["error"] is None
    assert len(shop.requests("/orders")) == 1
    run = api.get("/api/v1/runs/r-1").json()
    assert run["last_succeeded_tool_call_id"] == call["tool_call_id"]
    assert not run["summary"].startswith("Based on partial data"), run["summary"]


def test_it_keeps_asking_with_growing_delays_while_the_query_fails(
    api: APIClient, shop: Shop
) -> None:
    call = unknown_order(api, shop, drop_after_commit=1)
    row = assert_left_unknown_for_the_worker(call, reason="downstream_error")
    delays = []
    for look in (1, 2, 3):
        lookups_before = len(shop.requests("/orders/lookup"))
        make_due(call["call_id"])
        started = timezone.now()

        assert reconcile_unknown_calls() == 1

        row.refresh_from_db()
        assert row.status == "unknown"
        assert row.result is None
        assert row.finished_at is None
        assert row.reconcile_attempts == look
        assert row.next_reconcile_at is not None
        delays.append((row.next_reconcile_at - started).total_seconds())
        # Each look asks again — until the query tool's own breaker opens on its failures,
        # and then it stops sending, like every other process.
        query_open = CircuitBreaker.objects.filter(tool="query_order", state="open").exists()
        assert len(shop.requests("/orders/lookup")) > lookups_before or query_open
    # Backoff: every look waits longer than the one before, and none comes back at once.
    assert delays[0] >= 5, delays
    assert delays[0] < delays[1] < delays[2], delays
    # Still only the one order request, and the one order it made.
    assert len(shop.requests("/orders")) == 1
    assert shop.state()["counts"]["orders"] == 1


def test_it_stops_asking_after_the_last_look_and_leaves_the_call_to_a_person(
    api: APIClient, shop: Shop
) -> None:
    call = unknown_order(api, shop, drop_after_commit=1)
    row = ToolCall.objects.get(call_id=call["call_id"])
    ToolCall.objects.filter(pk=row.pk).update(reconcile_attempts=RECONCILE_MAX_ATTEMPTS - 2)
    make_due(call["call_id"])

    assert reconcile_unknown_calls() == 1

    row.refresh_from_db()
    assert row.reconcile_attempts == RECONCILE_MAX_ATTEMPTS - 1
    # The delay is capped.
    delay = (row.next_reconcile_at - timezone.now()).total_seconds()
    assert settle.RECONCILE_CAP_S - 5 < delay <= settle.RECONCILE_CAP_S

    make_due(call["call_id"])
    assert reconcile_unknown_calls() == 1

    row.refresh_from_db()
    assert row.status == "unknown"
    assert row.reconcile_attempts == RECONCILE_MAX_ATTEMPTS
    assert row.next_reconcile_at is None
    lookups = len(shop.requests("/orders/lookup"))
    # Nothing is due any more: later sweeps do not ask again.
    assert settle.unknown_calls_due() == []
    assert reconcile_unknown_calls() == 0
    assert len(shop.requests("/orders/lookup")) == lookups
    assert len(shop.requests("/orders")) == 1


def test_it_asks_once_when_a_second_worker_comes_while_the_first_is_looking(
    transactional_db: None, api: APIClient, shop: Shop
) -> None:
    call = unknown_order(api, shop, drop_after_commit=1)
    row = ToolCall.objects.get(call_id=call["call_id"])
    make_due(call["call_id"])
    # The lookup answers, slowly: the second worker arrives while the first is asking.
    shop.fault("/orders/lookup", latency_ms=1000)
    lookups_before = len(shop.requests("/orders/lookup"))
    outcomes: list[str] = []

    def first_worker() -> None:
        try:
            outcomes.append(call_reconcile(call_pk=row.pk))
        finally:
            connection.close()

    thread = threading.Thread(target=first_worker)
    thread.start()
    wait_until(lambda: len(shop.requests("/orders/lookup")) > lookups_before)

    second = call_reconcile(call_pk=row.pk)
    thread.join(30)

    assert (outcomes, second) == (["succeeded"], "skipped")
    assert len(shop.requests("/orders/lookup")) == lookups_before + 1
    row.refresh_from_db()
    assert row.status == "succeeded"
    assert Attempt.objects.filter(call=row, purpose="reconcile", http_status=200).count() == 1
    assert len(shop.requests("/orders")) == 1


def test_two_workers_starting_together_ask_at_most_once(
    transactional_db: None, api: APIClient, shop: Shop
) -> None:
    call = unknown_order(api, shop, drop_after_commit=1)
    row = ToolCall.objects.get(call_id=call["call_id"])
    make_due(call["call_id"])
    shop.fault("/orders/lookup", latency_ms=500)
    lookups_before = len(shop.requests("/orders/lookup"))
    start = threading.Barrier(2)
    outcomes: list[str] = []

    def worker() -> None:
        try:
            start.wait()
            outcomes.append(call_reconcile(call_pk=row.pk))
        finally:
            connection.close()

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)

    assert sorted(outcomes) == ["skipped", "succeeded"]
    assert len(shop.requests("/orders/lookup")) == lookups_before + 1
    row.refresh_from_db()
    assert row.status == "succeeded"
    assert len(shop.requests("/orders")) == 1


def test_it_does_not_look_again_for_a_sweep_that_listed_the_call_before_another_looked(
    api: APIClient, shop: Shop
) -> None:
    # Two overlapping sweeps (beat fires every 10 s; a sweep of slow queries takes longer)
    # list the same due call. The first looks (the query fails, the call is due again in
    # 10 s); the second must not look again at once, nor count a second look.
    call = unknown_order(api, shop, drop_after_commit=1)
    make_due(call["call_id"])
    [pk] = settle.unknown_calls_due()
    assert call_reconcile(call_pk=pk) == "unknown"
    lookups = len(shop.requests("/orders/lookup"))

    outcome = call_reconcile(call_pk=pk)

    row = ToolCall.objects.get(pk=pk)
    assert outcome == "skipped"
    assert row.reconcile_attempts == 1
    assert len(shop.requests("/orders/lookup")) == lookups


# -- a person settles it ---------------------------------------------------------------


def unknown_charge(api: APIClient, shop: Shop, catalog: Any) -> ToolCall:
    """A charge with no query tool whose answer was lost: only a person can settle it."""
    catalog(charge_noquery())
    start_run(api)
    shop.fault("/payments/charges", drop_after_commit=1)
    call = call_ok(api, step_index=3, tool="charge_noquery", args=CHARGE_ARGS)
    assert call["status"] == "unknown", call
    assert "a person will check it" in call["feedback"]
    row = ToolCall.objects.get(call_id=call["call_id"])
    # No query tool: the worker has nothing to ask, so nothing is scheduled.
    assert row.next_reconcile_at is None
    return row


SETTLED_FIELDS = (
    "status",
    "result",
    "error_class",
    "error_reason",
    "error_message",
    "feedback",
    "finished_at",
    "settled_by_id",
    "settle_note",
    "next_reconcile_at",
)


def snapshot(call: ToolCall) -> dict[str, Any]:
    call.refresh_from_db()
    return {f: getattr(call, f) for f in SETTLED_FIELDS}


def test_a_person_settles_an_unknown_charge_as_succeeded_once(
    api: APIClient, shop: Shop, catalog: Any, django_user_model: Any
) -> None:
    row = unknown_charge(api, shop, catalog)
    [charge] = shop.state()["charges"]
    alice = django_user_model.objects.create_user("alice")
    bob = django_user_model.objects.create_user("bob")

    settled = call_settle(
        call=row,
        by=alice,
        succeeded=True,
        note="  charge seen in the PSP dashboard  ",
        result={"charge_id": charge["charge_id"]},
    )

    assert settled is True
    first = snapshot(row)
    assert first["status"] == "succeeded"
    assert first["result"] == {"charge_id": charge["charge_id"]}
    assert first["error_class"] == "" and first["error_message"] == ""
    assert first["settled_by_id"] == alice.pk
    assert first["settle_note"] == "charge seen in the PSP dashboard"
    assert first["finished_at"] is not None
    assert "checked by a person" in first["feedback"]
    answer = api.get(f"/api/v1/calls/{row.call_id}").json()
    assert answer["status"] == "succeeded"
    assert answer["result"] == {"charge_id": charge["charge_id"]}
    assert answer["error"] is None

    # A second decision, by anyone, changes nothing.
    assert call_settle(call=row, by=bob, succeeded=False, note="no, it failed") is False
    assert snapshot(row) == first
    # Settling sent nothing.
    assert len(shop.requests("/payments/charges")) == 1
    assert shop.state()["counts"]["charges"] == 1


def test_a_person_settles_an_unknown_charge_as_failed(
    api: APIClient, shop: Shop, catalog: Any, django_user_model: Any
) -> None:
    row = unknown_charge(api, shop, catalog)
    alice = django_user_model.objects.create_user("alice")

    assert call_settle(call=row, by=alice, succeeded=False, note="PSP has no such charge")

    settled = snapshot(row)
    assert settled["status"] == "failed"
    assert settled["result"] is None
    assert settled["error_class"] == "fatal"
    assert "PSP has no such charge" in settled["error_message"]
    assert "did not take effect" in settled["feedback"]
    assert settled["settled_by_id"] == alice.pk
    again = call_ok(api, step_index=3, tool="charge_noquery", args=CHARGE_ARGS)
    assert again["replayed"] is True
    assert again["status"] == "failed"
    assert len(shop.requests("/payments/charges")) == 1


def test_settling_requires_a_note_and_changes_nothing_without_one(
    api: APIClient, shop: Shop, catalog: Any, django_user_model: Any
) -> None:
    row = unknown_charge(api, shop, catalog)
    alice = django_user_model.objects.create_user("alice")
    before = snapshot(row)

    for note in ("", "   \n"):
        with pytest.raises(ValueError, match="note"):
            call_settle(call=row, by=alice, succeeded=True, note=note)

    assert snapshot(row) == before
    assert before["status"] == "unknown"


def test_a_person_settling_stops_the_workers_looks(
    api: APIClient, shop: Shop, django_user_model: Any
) -> None:
    call = unknown_order(api, shop, drop_after_commit=1)
    row = ToolCall.objects.get(call_id=call["call_id"])
    shop.fault("/orders/lookup")
    make_due(call["call_id"])
    alice = django_user_model.objects.create_user("alice")

    assert call_settle(call=row, by=alice, succeeded=False, note="cancelled by phone")
    lookups = len(shop.requests("/orders/lookup"))

    assert reconcile_unknown_calls() == 0
    assert call_reconcile(call_pk=row.pk) == "skipped"
    row.refresh_from_db()
    assert row.status == "failed"
    assert row.settle_note == "cancelled by phone"
    assert len(shop.requests("/orders/lookup")) == lookups


def test_settling_a_call_that_is_not_unknown_changes_nothing(
    api: APIClient, shop: Shop, django_user_model: Any
) -> None:
    start_run(api)
    done = call_ok(api, step_index=0, tool="query_stock", args={"sku": "A12"})
    row = ToolCall.objects.get(call_id=done["call_id"])
    before = snapshot(row)

    settled = call_settle(
        call=row, by=django_user_model.objects.create_user("alice"), succeeded=False, note="x"
    )

    assert settled is False
    assert snapshot(row) == before


def test_it_does_not_ask_a_query_tool_whose_breaker_is_open(
    api: Any, shop: Any, catalog: Any
) -> None:
    """The worker shares the web processes' breakers: an open breaker on the query tool
    means no request, and the call stays unknown for a later look."""
    catalog("")
    allow_without_approval("create_order")
    start_run(api)
    shop.fault("/orders", timeout_next=1, hang_s=3)
    shop.fault("/orders/lookup", fail_next=10, fail_status=503)
    body = call_ok(
        api, step_index=0, tool="create_order", args={"sku": "A12", "qty": 1, "amount": "5.00"}
    )
    assert body["status"] == "unknown"
    shop.fault("/orders/lookup")
    looks_before = len(shop.requests("/orders/lookup"))
    breaker.breaker_force_open(tool="query_order", seconds=600, reason="test")
    ToolCall.objects.filter(call_id=body["call_id"]).update(
        next_reconcile_at=timezone.now() - timedelta(seconds=1)
    )

    assert call_reconcile(call_pk=ToolCall.objects.get(call_id=body["call_id"]).pk) == "unknown"
    assert len(shop.requests("/orders/lookup")) == looks_before
