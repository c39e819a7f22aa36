"""The approval scenarios: calls that wait for a person, who decides in the console.

Their runs carry no ``demo_reviewer`` metadata, so the scripted reviewer leaves them
alone (toolops/demo/reviewer.py). Each prints its line at once — the call answered 202
`pending_approval`, and the approval page to open as `reviewer` — and leaves a watcher
behind: a daemon thread of the agent process that long-polls the call and prints one
more line, prefixed ``↳``, when a reviewer approves or rejects it or it expires. The
watchers live as long as the process does: under `manage.py demo`, until Ctrl-C.
"""

from __future__ import annotations

import threading
import time
from datetime import datetime

import httpx

from toolops.demo.clients import JSON, ToolOps, Unexpected
from toolops.demo.scenario import (
    CURRENCY,
    CUSTOMER,
    CUSTOMER_ID,
    WAITING,
    Demo,
    Outcome,
    charge_args,
    expect,
    expect_status,
    order_args,
    quote,
    reason,
    reviewed,
    waiting_for_reviewer,
)

# A watcher's long-poll. Short: a web server that is stopping waits for the requests it
# holds, so Ctrl-C is held up by at most this long.
WATCH_POLL_S = 5.0
# Requests failing this long mean the demo's web server is gone: the watcher stops.
GIVE_UP_S = 60.0


# --- the watchers -------------------------------------------------------------------------


def watch(demo: Demo, name: str, run: str, call: JSON) -> None:
    """Follow a held call on a thread of its own; report its outcome once decided."""
    client = demo.api.clone()

    def follow() -> None:
        try:
            final = wait_for_decision(client, call)
        finally:
            client.close()
        if final is not None:
            demo.report(f"↳ {name}: run {run}: {outcome(final)}")

    thread = threading.Thread(target=follow, name=f"watch-{call['call_id']}", daemon=True)
    thread.start()
    demo.watchers.append(thread)


def wait_for_decision(client: ToolOps, call: JSON) -> JSON | None:
    """The call once it is decided (and, if approved, executed); None when the API has
    been unreachable for GIVE_UP_S."""
    failing_since: float | None = None
    while call["status"] in WAITING:
        try:
            call = client.call_get(call["call_id"], wait=WATCH_POLL_S)
            failing_since = None
        except (httpx.HTTPError, Unexpected):
            failing_since = failing_since or time.monotonic()
            if time.monotonic() - failing_since > GIVE_UP_S:
                return None
            time.sleep(1.0)
    return call


def outcome(call: JSON) -> str:
    """What became of a call a person was asked about, in one sentence."""
    tool, approval = call["tool"], call.get("approval") or {}
    who = approval.get("decided_by") or "a reviewer"
    if call["status"] == "rejected" and reason(call) == "expired":
        return (
            f"{tool} expired — nobody decided by {clock(approval.get('expires_at'))}; the "
            "worker ended it rejected (reason expired) and nothing was sent"
        )
    if call["status"] == "rejected":
        note = approval.get("note") or "no note"
        return f"{tool} rejected: {note} (by {who}); nothing was sent"
    if call["status"] == "succeeded":
        return f"{tool} {result_id(call)}succeeded after approval by {who}"
    return f"{tool} {call['status']} after approval by {who} {quote(call.get('feedback'), 120)}"


def result_id(call: JSON) -> str:
    """“ch_123 ” from a result that names what it made, else nothing."""
    result = call.get("result") or {}
    ids = [str(v) for k, v in result.items() if k.endswith("_id") and isinstance(v, str)]
    return f"{ids[0]} " if ids else ""


def clock(iso: str | None) -> str:
    if not iso:
        return "its expiry"
    return f"{datetime.fromisoformat(iso):%H:%M:%S} UTC"


def duration(seconds: int) -> str:
    """“20 s”, “10 min”, “1 min 30 s”."""
    minutes, rest = divmod(seconds, 60)
    if not minutes:
        return f"{rest} s"
    return f"{minutes} min" + (f" {rest} s" if rest else "")


def seconds_between(start: str, end: str) -> float:
    return (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()


def held(call: JSON, tool: str, why: str) -> JSON:
    """The call's approval, after checking the call waits for a person for `why`."""
    expect_status(call, "pending_approval")
    approval = call.get("approval") or {}
    expect(call["tool"] == tool, f"{call['tool']} answered, not {tool}")
    expect(approval.get("status") == "pending", f"its approval is {approval.get('status')}")
    expect(approval.get("reason") == why, f"held for {approval.get('reason')}, not {why}")
    return approval


def order_for(demo: Demo, run: str, amount: str) -> JSON | Outcome:
    """create_order in an auto-reviewed run: the scripted reviewer approves it."""
    api = demo.api
    order = reviewed(
        api, api.call(run, 0, "create_order", order_args(demo.sku, amount), tool_call_id="tc-1")
    )
    if order["status"] == "pending_approval":
        return waiting_for_reviewer(run, order)
    expect_status(order, "succeeded")
    return order


# --- the scenarios ------------------------------------------------------------------------


def charge_waits(demo: Demo) -> Outcome:
    """One conversation, two runs: an order (approved by the scripted reviewer), then its
    charge in a run a person reviews, with the same session_key — so the approval page
    shows the order among the conversation's earlier calls. 202 pending_approval, nothing
    sent until someone decides in the console."""
    api = demo.api
    session = demo.new_session()
    order_run = demo.new_run("order-to-charge", auto_review=True, session_key=session)
    order = order_for(demo, order_run, "89.00")
    if isinstance(order, Outcome):
        return order
    api.run_complete(order_run)
    order_id = order["result"]["order_id"]
    run = demo.new_run("charge-review", session_key=session)
    charge = api.call(run, 0, "charge", charge_args(order_id, "89.00"), tool_call_id="tc-1")
    approval = held(charge, "charge", "irreversible")
    expect(
        not demo.shop.requests_for_run("/payments/charges", run),
        "the held charge reached the shop",
    )
    watch(demo, "charge waits for a reviewer", run, charge)
    return Outcome(
        True,
        f"run {order_run}: create_order {order_id} succeeded (approved by the scripted "
        f"reviewer); run {run} (same session_key {session}): its charge of 89.00 "
        f"{CURRENCY} to customer {CUSTOMER_ID} answered 202 pending_approval (reason "
        f"irreversible) and nothing was sent — log in as reviewer and open {approval['url']}"
        " to Approve or Reject it; the outcome is printed below (↳) when it is decided",
    )


def possible_duplicate(demo: Demo) -> Outcome:
    """Two runs of one conversation (one session_key) make the same order: the first is
    approved and made; the second is held as a possible duplicate of the first."""
    api = demo.api
    session = demo.new_session()
    first_run = demo.new_run("order", auto_review=True, session_key=session)
    first = order_for(demo, first_run, "64.00")
    if isinstance(first, Outcome):
        return first
    api.run_complete(first_run)
    run = demo.new_run("order-again", session_key=session)
    again = api.call(run, 0, "create_order", order_args(demo.sku, "64.00"), tool_call_id="tc-1")
    approval = held(again, "create_order", "possible_duplicate")
    expect(
        approval.get("duplicate_of") == first["call_id"],
        f"duplicate_of is {approval.get('duplicate_of')}, not the first call {first['call_id']}",
    )
    expect(not demo.shop.requests_for_run("/orders", run), "the held order reached the shop")
    watch(demo, "possible duplicate", run, again)
    return Outcome(
        True,
        f"run {first_run}: create_order succeeded (call {first['call_id']}, order "
        f"{first['result']['order_id']}); run {run} (same session_key {session}): the same "
        f"create_order answered 202 pending_approval, reason possible_duplicate, "
        f"duplicate_of {approval['duplicate_of']} — nothing is ordered twice unless a "
        f"reviewer approves it at {approval['url']}",
    )


def approval_expires(demo: Demo) -> Outcome:
    """send_voucher gives a reviewer its approval_ttl_s (10 minutes in the demo catalog):
    undecided, the worker ends it `rejected` with reason `expired`, and nothing is sent.
    `python -m toolops.demo.agent --only "approval expires"` starts another when asked."""
    api, run = demo.api, demo.new_run("voucher")
    message = "Sorry for the wait: 10% off your next order with code DEMO10."
    call = api.call(
        run, 0, "send_voucher", {"to": CUSTOMER, "message": message}, tool_call_id="tc-1"
    )
    approval = held(call, "send_voucher", "irreversible")
    ttl = round(seconds_between(call["created_at"], approval["expires_at"]))
    watch(demo, "approval expires", run, call)
    return Outcome(
        True,
        f"run {run}: send_voucher answered 202 pending_approval; it expires in "
        f"{duration(ttl)} (at {clock(approval['expires_at'])}) unless a reviewer acts at "
        f"{approval['url']}; then the worker ends it rejected, reason expired, and nothing "
        "is sent — the outcome is printed below (↳)",
    )
