"""The resilience scenarios of the demo agent: what ToolOps does when a downstream
misbehaves — a lost response, a hanging payment service, a flaky or rate-limited read,
bad input, a budget, an open breaker, an unknown charge. Each sets the shop's fault for
the condition it shows and clears it afterwards, whatever happens. Their runs are
auto-reviewed (reviewer.py). What a run says when only part of it worked is in
partial.py."""

from __future__ import annotations

import time

from toolops.demo.clients import JSON
from toolops.demo.scenario import (
    CUSTOMER,
    Demo,
    Outcome,
    approved_by,
    charge_args,
    expect,
    expect_status,
    order_args,
    plural,
    quote,
    reason,
    reviewed,
    waiting_for_reviewer,
)


def happy_path(demo: Demo) -> Outcome:
    """query_stock → reserve_stock → create_order → charge → send_notification → complete."""
    api, run = demo.api, demo.new_run("happy", auto_review=True)
    stock = api.call(run, 0, "query_stock", {"sku": demo.sku}, tool_call_id="tc-stock")
    expect_status(stock, "succeeded")
    reserve = api.call(
        run,
        1,
        "reserve_stock",
        {"sku": demo.sku, "qty": 1},
        tool_call_id="tc-reserve",
        depends_on=["tc-stock"],
    )
    expect_status(reserve, "succeeded")
    order = api.call(
        run,
        2,
        "create_order",
        order_args(demo.sku, "199.00"),
        tool_call_id="tc-order",
        depends_on=["tc-reserve"],
    )
    order = reviewed(api, order)
    if order["status"] == "pending_approval":
        return waiting_for_reviewer(run, order)
    expect_status(order, "succeeded")
    order_id = order["result"]["order_id"]
    charge = api.call(
        run,
        3,
        "charge",
        charge_args(order_id, "199.00"),
        tool_call_id="tc-charge",
        depends_on=["tc-order"],
    )
    charge = reviewed(api, charge)
    if charge["status"] == "pending_approval":
        return waiting_for_reviewer(run, charge)
    expect_status(charge, "succeeded")
    note = api.call(
        run,
        4,
        "send_notification",
        {"to": CUSTOMER, "message": f"Order {order_id} is confirmed and paid."},
        tool_call_id="tc-notify",
        depends_on=["tc-charge"],
    )
    note = reviewed(api, note)
    if note["status"] == "pending_approval":
        return waiting_for_reviewer(run, note)
    expect_status(note, "succeeded")
    ended = api.run_complete(run)
    expect(ended["status"] == "completed", f"run is {ended['status']} after complete")
    return Outcome(
        True,
        f"run {run} completed ({plural(len(ended['calls']), 'call')}; "
        f"{approved_by(order, charge)})",
    )


def lost_response(demo: Demo) -> Outcome:
    """The order is created but its response is lost: ToolOps must not order twice."""
    api, shop, run = demo.api, demo.shop, demo.new_run("lost-response", auto_review=True)
    # The worker sends the order once it is approved: the fault stays while we wait.
    with shop.fault("/orders", drop_after_commit=1):
        call = api.call(run, 0, "create_order", order_args(demo.sku, "49.90"), tool_call_id="tc-1")
        call = reviewed(api, call)
    if call["status"] == "pending_approval":
        return waiting_for_reviewer(run, call)
    expect_status(call, "succeeded", "unknown")
    references = {
        (r.get("body") or {}).get("client_reference") for r in shop.requests_for_run("/orders", run)
    }
    orders = [o for o in shop.state()["orders"] if o["client_reference"] in references]
    expect(len(orders) == 1, f"the shop holds {len(orders)} orders for this call, not 1")
    lookups = len(shop.requests_for_run("/orders/lookup", run))
    api.run_complete(run)
    return Outcome(
        True,
        f"run {run}: response dropped after the commit; ToolOps answered {call['status']} "
        f"({plural(call['attempts'], 'attempt')}, {plural(lookups, 'query_order lookup')}) "
        f"{quote(call['feedback'], 90)}; the shop holds exactly 1 order for that reference",
    )


def charge_timeout(demo: Demo) -> Outcome:
    """The payment service hangs past the timeout: reconcile, never charge twice."""
    api, shop, run = demo.api, demo.shop, demo.new_run("charge-timeout", auto_review=True)
    order = api.call(run, 0, "create_order", order_args(demo.sku, "75.00"), tool_call_id="tc-1")
    order = reviewed(api, order)
    if order["status"] == "pending_approval":
        return waiting_for_reviewer(run, order)
    expect_status(order, "succeeded")
    order_id = order["result"]["order_id"]
    with shop.fault("/payments/charges", timeout_next=1, hang_s=3):
        charge = api.call(
            run,
            1,
            "charge",
            charge_args(order_id, "75.00"),
            tool_call_id="tc-2",
            depends_on=["tc-1"],
        )
        charge = reviewed(api, charge)
    if charge["status"] == "pending_approval":
        return waiting_for_reviewer(run, charge)
    expect_status(charge, "succeeded", "unknown")
    sent = len(shop.requests_for_run("/payments/charges", run))
    charges = [c for c in shop.state()["charges"] if c["order_id"] == order_id]
    expect(len(charges) <= 1, f"order {order_id} was charged {len(charges)} times")
    expect(
        charge["status"] == "unknown" or len(charges) == 1,
        "the charge succeeded but the shop holds no charge for the order",
    )
    if charge["status"] == "succeeded":
        api.run_complete(run)
        settled = "reconciled with get_charge"
    else:
        settled = "left unknown for the worker to reconcile"
    return Outcome(
        True,
        f"run {run}: charge hung past its timeout; {charge['status']} after "
        f"{plural(charge['attempts'], 'attempt')}, {settled}; {plural(sent, 'request')} "
        f"sent, {plural(len(charges), 'charge')} for order {order_id} — never two",
    )


def flaky_read(demo: Demo) -> Outcome:
    """Two 503s on a read: retried with backoff, third attempt succeeds."""
    api, shop, run = demo.api, demo.shop, demo.new_run("flaky-read")
    with shop.fault("/inventory/stock", fail_next=2, fail_status=503):
        call = api.call(run, 0, "query_stock", {"sku": demo.sku}, tool_call_id="tc-1")
    expect_status(call, "succeeded")
    expect(call["attempts"] == 3, f"query_stock took {call['attempts']} attempts, not 3")
    api.run_complete(run)
    return Outcome(
        True, f"run {run}: query_stock succeeded on attempt 3 after two 503s (retry class)"
    )


def rate_limited(demo: Demo) -> Outcome:
    """A 429 with Retry-After: 1 — the retry waits at least that long."""
    api, shop, run = demo.api, demo.shop, demo.new_run("rate-limited")
    with shop.fault("/inventory/stock", burst_429=1, retry_after=1):
        started = time.monotonic()
        call = api.call(run, 0, "query_stock", {"sku": demo.sku}, tool_call_id="tc-1")
        elapsed = time.monotonic() - started
    expect_status(call, "succeeded")
    expect(elapsed >= 1.0, f"the retry came after {elapsed:.2f} s, before Retry-After (1 s)")
    api.run_complete(run)
    return Outcome(
        True,
        f"run {run}: 429 then success after {elapsed:.1f} s "
        f"({plural(call['attempts'], 'attempt')}), Retry-After honoured",
    )


def replay(demo: Demo) -> Outcome:
    """The model sends the same reservation twice: the second is the first's record."""
    api, shop, run = demo.api, demo.shop, demo.new_run("replay")
    args = {"sku": demo.sku, "qty": 1}
    first = api.call(run, 0, "reserve_stock", args)
    expect_status(first, "succeeded")
    second = api.call(run, 0, "reserve_stock", dict(args))
    expect(second["replayed"] is True, "the repeated reserve_stock was not answered as a replay")
    expect(second["call_id"] == first["call_id"], "the replay answered another call")
    sent = shop.requests_for_run("/inventory/reservations", run)
    reservation_id = first["result"]["reservation_id"]
    held = [r for r in shop.state()["reservations"] if r["reservation_id"] == reservation_id]
    expect(len(sent) == 1, f"the shop received {len(sent)} reservation requests, not 1")
    expect(len(held) == 1, f"the shop holds {len(held)} reservations, not 1")
    api.run_complete(run)
    return Outcome(
        True,
        f"run {run}: second reserve_stock answered replayed: true; 1 request reached "
        f"the shop, 1 reservation ({reservation_id})",
    )


def bad_input(demo: Demo) -> Outcome:
    """A misspelt tool and an ill-typed argument: failed calls with feedback, nothing sent."""
    api, shop, run = demo.api, demo.shop, demo.new_run("bad-input")
    typo = api.call(run, 0, "create_ordr", order_args(demo.sku, "10.00"), tool_call_id="tc-1")
    expect_status(typo, "failed")
    expect((typo["error"] or {}).get("reason") == "unknown_tool", f"reason {typo['error']}")
    expect("create_order" in typo["feedback"], "the feedback does not suggest create_order")
    bad = api.call(run, 1, "reserve_stock", {"sku": demo.sku, "qty": "lots"}, tool_call_id="tc-2")
    expect_status(bad, "failed")
    expect((bad["error"] or {}).get("reason") == "invalid_args", f"reason {bad['error']}")
    expect("qty" in bad["feedback"], "the feedback does not name the field qty")
    expect(
        not shop.requests_for_run("/inventory/reservations", run),
        "an invalid call reached the shop",
    )
    api.run_complete(run)
    return Outcome(
        True,
        f"run {run}: create_ordr → unknown_tool {quote(typo['feedback'], 70)}; "
        f'qty "lots" → invalid_args {quote(bad["feedback"], 90)}',
    )


def budget(demo: Demo) -> Outcome:
    """A run allowed 2 attempts meets a failing read: the run stops taking calls."""
    api, shop = demo.api, demo.shop
    run = demo.new_run("budget", budget={"max_attempts": 2})
    with shop.fault("/inventory/stock", fail_next=5, fail_status=503):
        call = api.call(run, 0, "query_stock", {"sku": demo.sku}, tool_call_id="tc-1")
    expect_status(call, "failed")
    reason = (call["error"] or {}).get("reason")
    expect(reason == "budget_exhausted", f"query_stock failed with reason {reason}")
    status = api.run_get(run)["status"]
    expect(status == "budget_exhausted", f"the run is {status}, not budget_exhausted")
    later = api.call_post(run, {"step_index": 1, "tool": "query_stock", "args": {"sku": "D9"}})
    expect(later.status_code == 409, f"a later call answered {later.status_code}, not 409")
    return Outcome(
        True,
        f"run {run} budget_exhausted after {plural(call['attempts'], 'attempt')}; "
        "the next call answered 409",
    )


def circuit_breaker(demo: Demo) -> Outcome:
    """legacy_inventory keeps failing: its breaker opens, and the next call is refused at
    once, without a request; /api/v1/tools shows it unavailable until its cool-down ends."""
    api, shop, run = demo.api, demo.shop, demo.new_run("breaker")
    failing: JSON | None = None
    refused: JSON | None = None
    # A dedicated tool on its own path: the breaker it opens is no other scenario's.
    with shop.fault("/legacy/inventory", fail_next=20, fail_status=503):
        for step in range(4):
            call = api.call(
                run, step, "legacy_inventory", {"sku": demo.sku}, tool_call_id=f"tc-{step + 1}"
            )
            expect_status(call, "failed")
            if reason(call) == "circuit_open" and call["attempts"] == 0:
                refused = call
                break
            failing = failing or call
    expect(refused is not None, "legacy_inventory's breaker did not open after 4 failing calls")
    assert refused is not None
    sent = len(shop.requests_for_run("/legacy/inventory", run))
    listed = {t["name"]: t for t in api.tools()}.get("legacy_inventory") or {}
    expect(listed.get("available") is False, "GET /api/v1/tools shows legacy_inventory available")
    expect(bool(listed.get("available_at")), "GET /api/v1/tools gives no available_at")
    api.run_complete(run)
    opened = (
        f"legacy_inventory failed {plural(failing['attempts'], 'attempt')} (503) and its "
        "breaker opened"
        if failing is not None
        else "legacy_inventory's breaker was still open from an earlier demo"
    )
    return Outcome(
        True,
        f"run {run}: {opened}; the next call answered circuit_open with 0 attempts "
        f"{quote(refused['feedback'], 90)}; {plural(sent, 'request')} reached the shop; "
        f"/api/v1/tools: available=false, available_at {listed['available_at']}",
    )


def unknown_charge(demo: Demo) -> Outcome:
    """The charge's answer is lost and get_charge is down too: the outcome is unknown, the
    model is told not to retry, and nothing is sent twice. Once the faults are cleared the
    worker settles it with get_charge (or a person does, in the console)."""
    api, shop, run = demo.api, demo.shop, demo.new_run("unknown-charge", auto_review=True)
    order = api.call(run, 0, "create_order", order_args(demo.sku, "12.50"), tool_call_id="tc-1")
    order = reviewed(api, order)
    if order["status"] == "pending_approval":
        return waiting_for_reviewer(run, order)
    expect_status(order, "succeeded")
    order_id = order["result"]["order_id"]
    with (
        shop.fault("/payments/charges", drop_after_commit=1),
        shop.fault("/payments/charges/lookup", fail_next=50, fail_status=500),
    ):
        charge = api.call(
            run,
            1,
            "charge",
            charge_args(order_id, "12.50"),
            tool_call_id="tc-2",
            depends_on=["tc-1"],
        )
        charge = reviewed(api, charge)
    if charge["status"] == "pending_approval":
        return waiting_for_reviewer(run, charge)
    expect_status(charge, "unknown")
    expect("do not retry" in charge["feedback"].lower(), "the feedback does not say not to retry")
    sent = len(shop.requests_for_run("/payments/charges", run))
    lookups = len(shop.requests_for_run("/payments/charges/lookup", run))
    charges = [c for c in shop.state()["charges"] if c["order_id"] == order_id]
    expect(sent == 1, f"{sent} charge requests reached the shop, not 1")
    expect(len(charges) == 1, f"order {order_id} holds {len(charges)} charges, not 1")
    # The run stays open: the worker settles the charge, then the agent can go on.
    return Outcome(
        True,
        f"run {run}: the charge's response was lost and get_charge failed too "
        f"({plural(lookups, 'lookup')}): unknown after 1 attempt, not retried "
        f"{quote(charge['feedback'], 110)}; faults cleared — the worker will settle "
        "it with get_charge within ~30 s (or a person, in the console)",
    )
