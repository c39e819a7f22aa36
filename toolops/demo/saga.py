"""The saga scenarios: a run abandoned after its writes is undone by the worker.

Each successful compensable write registers its undo (reserve_stock → release_stock,
create_order → cancel_order, charge → refund). `POST /abort` answers `aborting` at once;
the Celery worker then runs the undos newest first, each with bounded retries, and ends
the run `aborted` — or `compensation_failed` when an undo still fails after its attempts
(it is dead-lettered, and a ticket opens on the support desk). The agent only watches:
it polls the run, then checks the order of the undo requests in the shop's request log.
"""

from __future__ import annotations

import time

from toolops.demo.clients import JSON, ShopControl, ToolOps
from toolops.demo.scenario import (
    Demo,
    Outcome,
    charge_args,
    expect,
    expect_status,
    order_args,
    plural,
    reviewed,
    waiting_for_reviewer,
)

# API.md promises `aborted` within 60 s with healthy downstreams; the demo's idle worker
# takes a second or two, and a refund that fails all its attempts a few more.
SETTLE_S = 30.0
POLL_S = 0.25
# The undo tools and their paths in the shop, in the order the worker runs them for a
# reserve → order → charge run: newest first.
UNDO_PATHS = {
    "refund": "/payments/refunds",
    "cancel_order": "/orders/cancel",
    "release_stock": "/inventory/reservations/release",
}
# refund's max_attempts in the demo catalog: a fault that fails this many requests
# outlasts the undo's retries, and then the shop heals by itself.
REFUND_ATTEMPTS = 3
NO_WORKER = "is a worker running? (celery -A toolops worker)"
# Undo attempts count in their tool's circuit breaker like any other call's: the
# dead-letter scenario's failing refunds, repeated by quick re-runs of the demo agent,
# can open refund's breaker (failure rate over a 60 s window).
BREAKER_HINT = (
    "refund's circuit breaker may be open after demo runs in the last minute "
    "(see /console/health/); try again after its cool-down"
)


def buy(demo: Demo, run: str, amount: str) -> dict[str, JSON] | Outcome:
    """reserve_stock → create_order → charge, each depending on the one before: three
    undos registered. The run is auto-reviewed: the scripted reviewer approves the order
    and the charge. An Outcome instead when a call still waits for a reviewer."""
    api, sku = demo.api, demo.sku
    reserve = api.call(run, 0, "reserve_stock", {"sku": sku, "qty": 1}, tool_call_id="tc-1")
    expect_status(reserve, "succeeded")
    order = api.call(
        run, 1, "create_order", order_args(sku, amount), tool_call_id="tc-2", depends_on=["tc-1"]
    )
    order = reviewed(api, order)
    if order["status"] == "pending_approval":
        return waiting_for_reviewer(run, order)
    expect_status(order, "succeeded")
    charge = api.call(
        run,
        2,
        "charge",
        charge_args(order["result"]["order_id"], amount),
        tool_call_id="tc-3",
        depends_on=["tc-2"],
    )
    charge = reviewed(api, charge)
    if charge["status"] == "pending_approval":
        return waiting_for_reviewer(run, charge)
    expect_status(charge, "succeeded")
    return {"reserve_stock": reserve, "create_order": order, "charge": charge}


def abort_and_wait(api: ToolOps, run: str, reason: str) -> tuple[JSON, float]:
    """Abort, then poll the run while the worker compensates. The run as it ended (or as
    it still is after SETTLE_S), and the seconds it took."""
    started = time.monotonic()
    ended = api.run_abort(run, reason)
    expect(ended["status"] in ("aborting", "aborted"), f"abort answered {ended['status']}")
    while ended["status"] == "aborting" and time.monotonic() - started < SETTLE_S:
        time.sleep(POLL_S)
        ended = api.run_get(run)
    return ended, time.monotonic() - started


def undo_statuses(run: JSON) -> dict[str, str]:
    return {c["tool"]: c["status"] for c in run.get("compensations") or []}


def undo_requests(shop: ShopControl, run: str) -> list[JSON]:
    """Every undo request the shop received for this run, in order of arrival."""
    found = [
        {**request, "tool": tool}
        for tool, path in UNDO_PATHS.items()
        for request in shop.requests_for_run(path, run)
    ]
    return sorted(found, key=lambda r: r["at"])


def in_order(requests: list[JSON]) -> list[str]:
    """The undo tools in the order their requests arrived, repeats folded (retries)."""
    tools: list[str] = []
    for request in requests:
        if not tools or tools[-1] != request["tool"]:
            tools.append(request["tool"])
    return tools


def console(run: str) -> str:
    return f"open Runs and search it: /console/runs/?q={run}"


# --- the scenarios ------------------------------------------------------------------------


def abort(demo: Demo) -> Outcome:
    """Reserve, then abandon the run: the worker releases the reservation."""
    api, shop, run = demo.api, demo.shop, demo.new_run("abort")
    reserve = api.call(run, 0, "reserve_stock", {"sku": demo.sku, "qty": 1}, tool_call_id="tc-1")
    expect_status(reserve, "succeeded")
    reservation_id = reserve["result"]["reservation_id"]
    ended, seconds = abort_and_wait(api, run, "demo: the customer changed their mind")
    expect(ended["status"] != "aborting", f"still aborting after {SETTLE_S:g} s: {NO_WORKER}")
    expect(ended["status"] == "aborted", f"the run ended {ended['status']}, not aborted")
    undos = undo_statuses(ended)
    expect(undos == {"release_stock": "succeeded"}, f"compensations: {undos}")
    held = [r for r in shop.state()["reservations"] if r["reservation_id"] == reservation_id]
    stock = held[0]["status"] if held else "missing"
    expect(stock == "released", f"reservation {reservation_id} is {stock}, not released")
    return Outcome(
        True,
        f"run {run}: reserve_stock, then abort → aborted in {seconds:.1f} s; "
        f"release_stock succeeded, reservation {reservation_id} is released",
    )


def saga_abort(demo: Demo) -> Outcome:
    """Reserve, order and charge, then abandon the run: the worker undoes all three,
    newest first — refund, cancel_order, release_stock."""
    api, shop, run = demo.api, demo.shop, demo.new_run("saga-abort", auto_review=True)
    calls = buy(demo, run, "42.00")
    if isinstance(calls, Outcome):
        return calls
    ended, seconds = abort_and_wait(api, run, "demo: the customer cancelled the purchase")
    expect(ended["status"] != "aborting", f"still aborting after {SETTLE_S:g} s: {NO_WORKER}")
    undos = undo_statuses(ended)
    expect(
        ended["status"] == "aborted" and undos == dict.fromkeys(UNDO_PATHS, "succeeded"),
        f"the run ended {ended['status']}, compensations {undos}; {BREAKER_HINT}",
    )
    order = in_order(undo_requests(shop, run))
    expect(order == list(UNDO_PATHS), f"the shop received the undos in the order {order}")
    order_id = calls["create_order"]["result"]["order_id"]
    charge_id = calls["charge"]["result"]["charge_id"]
    state = shop.state()
    [shop_order] = [o for o in state["orders"] if o["order_id"] == order_id]
    [shop_charge] = [c for c in state["charges"] if c["charge_id"] == charge_id]
    expect(shop_order["status"] == "cancelled", f"order {order_id} is {shop_order['status']}")
    expect(shop_charge["status"] == "refunded", f"charge {charge_id} is {shop_charge['status']}")
    return Outcome(
        True,
        f"run {run}: reserve_stock, create_order, charge succeeded, then abort → aborted "
        f"in {seconds:.1f} s; undone newest first: {' → '.join(order)} (each succeeded); "
        f"order {order_id} cancelled, charge {charge_id} refunded, stock released; "
        f"{console(run)}",
    )


def dead_letter(demo: Demo) -> Outcome:
    """The same purchase abandoned while the refund service is down: refund fails all its
    attempts and is dead-lettered, the older undos still run, and a ticket opens."""
    api, shop, run = demo.api, demo.shop, demo.new_run("dead-letter", auto_review=True)
    calls = buy(demo, run, "58.00")
    if isinstance(calls, Outcome):
        return calls
    # The fault outlasts refund's attempts and is then spent: the shop heals by itself,
    # so a Retry on the desk succeeds.
    with shop.fault(UNDO_PATHS["refund"], fail_next=REFUND_ATTEMPTS, fail_status=503):
        ended, seconds = abort_and_wait(api, run, "demo: the customer cancelled the purchase")
    expect(ended["status"] != "aborting", f"still aborting after {SETTLE_S:g} s: {NO_WORKER}")
    expect(
        ended["status"] == "compensation_failed",
        f"the run ended {ended['status']}, not compensation_failed",
    )
    undos = undo_statuses(ended)
    expected = {
        "refund": "dead_lettered",
        "cancel_order": "succeeded",
        "release_stock": "succeeded",
    }
    expect(undos == expected, f"compensations ended {undos}")
    requests = undo_requests(shop, run)
    refunds = [r["status"] for r in requests if r["tool"] == "refund"]
    expect(
        refunds == [503] * REFUND_ATTEMPTS,
        f"the shop answered {plural(len(refunds), 'refund request')} {refunds}, not "
        f"{REFUND_ATTEMPTS} × 503; {BREAKER_HINT}",
    )
    order = in_order(requests)
    expect(order == list(UNDO_PATHS), f"the shop received the undos in the order {order}")
    charge_id = calls["charge"]["result"]["charge_id"]
    return Outcome(
        True,
        f"run {run}: abort with the refund service down → refund failed "
        f"{plural(len(refunds), 'attempt')} (503) and was dead-lettered; cancel_order and "
        f"release_stock still succeeded; compensation_failed in {seconds:.1f} s. Charge "
        f"{charge_id} is not refunded: a ticket is open — log in as support, open "
        "/console/tickets/ and press Retry (the shop has healed) or Resolve with a note",
    )
