"""The scripted demo agent: realistic runs through the real executor API, over HTTP.

It is what an agent framework would be, minus the model: it opens runs, sends tool
calls, reads ToolOps' answers (status, feedback, attempts, replayed) and ends its runs.
Each scenario uses the demo shop's fault-injection API (``/_shop/faults``) to create
the condition it shows — a lost response, a hanging payment service, a flaky or
rate-limited read — and clears the fault afterwards, whatever happens.

    python -m toolops.demo.agent --url http://127.0.0.1:8000 --token TOKEN \
        --shop http://127.0.0.1:9000

The token may also come from the ``TOOLOPS_AGENT_TOKEN`` environment variable. Exit code
0 when every scenario ended as expected; one line per scenario, then a total.
"""

from __future__ import annotations

import argparse
import os
import secrets
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from typing import Any, TextIO

import httpx

JSON = dict[str, Any]

# Call statuses that end a call for good; the others are still being decided.
WAITING = ("pending_approval", "in_progress")
CUSTOMER = "customer@example.com"
# SKUs seeded in the shop with enough stock for reservations; the fullest one is used.
STOCKED_SKUS = ("A12", "D9")
LOW_STOCK = 10


class Unexpected(Exception):
    """ToolOps (or the shop) answered something the scenario did not expect."""


class ApiError(Unexpected):
    def __init__(self, response: httpx.Response) -> None:
        try:
            detail = response.json().get("detail", response.text)
        except ValueError:
            detail = response.text
        super().__init__(
            f"{response.request.method} {response.request.url.path} answered "
            f"{response.status_code}: {str(detail)[:200]}"
        )
        self.status_code = response.status_code


class ToolOps:
    """The executor API (API.md), as an agent uses it."""

    def __init__(self, url: str, token: str, *, timeout_s: float = 60.0) -> None:
        self.http = httpx.Client(
            base_url=url.rstrip("/") + "/api/v1",
            headers={"Authorization": f"Bearer {token}"},
            timeout=timeout_s,
        )

    def close(self) -> None:
        self.http.close()

    def _json(self, response: httpx.Response, *ok: int) -> JSON:
        if response.status_code not in ok:
            raise ApiError(response)
        return response.json()

    def run_create(self, run_id: str, session_key: str, budget: JSON | None = None) -> JSON:
        body: JSON = {"run_id": run_id, "session_key": session_key, "metadata": {"demo": True}}
        if budget is not None:
            body["budget"] = budget
        return self._json(self.http.post("/runs", json=body), 200, 201)

    def run_get(self, run_id: str) -> JSON:
        return self._json(self.http.get(f"/runs/{run_id}"), 200)

    def run_complete(self, run_id: str) -> JSON:
        return self._json(self.http.post(f"/runs/{run_id}/complete"), 200)

    def run_abort(self, run_id: str, reason: str) -> JSON:
        return self._json(self.http.post(f"/runs/{run_id}/abort", json={"reason": reason}), 202)

    def tools(self) -> list[JSON]:
        return self._json(self.http.get("/tools"), 200)["tools"]

    def call_post(self, run_id: str, body: JSON) -> httpx.Response:
        return self.http.post(f"/runs/{run_id}/calls", json=body)

    def call(
        self,
        run_id: str,
        step_index: int,
        tool: str,
        args: JSON,
        *,
        tool_call_id: str | None = None,
        depends_on: list[str] | None = None,
    ) -> JSON:
        body: JSON = {"step_index": step_index, "tool": tool, "args": args}
        if tool_call_id is not None:
            body["tool_call_id"] = tool_call_id
        if depends_on:
            body["depends_on"] = depends_on
        return self._json(self.call_post(run_id, body), 200, 202)


class ShopControl:
    """The demo shop's control API: faults, state and the request log."""

    def __init__(self, url: str) -> None:
        self.http = httpx.Client(base_url=url.rstrip("/"), timeout=10.0)

    def close(self) -> None:
        self.http.close()

    def set_fault(self, path: str, **fault: Any) -> None:
        self.http.post("/_shop/faults", json={"path": path, **fault}).raise_for_status()

    def clear_fault(self, path: str) -> None:
        self.http.post("/_shop/faults", json={"path": path}).raise_for_status()

    @contextmanager
    def fault(self, path: str, **fault: Any) -> Iterator[None]:
        """A fault on one path for the length of a block; cleared even when it fails."""
        self.set_fault(path, **fault)
        try:
            yield
        finally:
            with suppress(httpx.HTTPError):
                self.clear_fault(path)

    def state(self) -> JSON:
        response = self.http.get("/_shop/state")
        response.raise_for_status()
        return response.json()

    def requests_for_run(self, path: str, run_id: str) -> list[JSON]:
        """What reached the shop on `path` for one ToolOps run (X-Toolops-Run-Id)."""
        response = self.http.get("/_shop/requests", params={"path": path})
        response.raise_for_status()
        return [
            r
            for r in response.json()["requests"]
            if (r.get("headers") or {}).get("x-toolops-run-id") == run_id
        ]


@dataclass
class Outcome:
    ok: bool
    text: str


@dataclass
class ScenarioResult:
    name: str
    ok: bool
    text: str
    run_ids: list[str] = field(default_factory=list)
    seconds: float = 0.0


class Demo:
    """What every scenario shares: the two clients, a stamp for fresh run ids, a SKU."""

    def __init__(self, api: ToolOps, shop: ShopControl, stamp: str) -> None:
        self.api = api
        self.shop = shop
        self.stamp = stamp
        self.sku = STOCKED_SKUS[0]
        self.run_ids: list[str] = []
        self._number = 0

    def new_run(self, slug: str, budget: JSON | None = None) -> str:
        """A fresh run with its own session key; re-running the demo makes new runs."""
        self._number += 1
        run_id = f"demo-{self.stamp}-{self._number}-{slug}"
        self.api.run_create(run_id, f"demo-{self.stamp}-s{self._number}", budget)
        self.run_ids.append(run_id)
        return run_id

    def pick_sku(self) -> str | None:
        """The stocked SKU with most units left; a warning when the shop runs low."""
        stock = self.shop.state().get("stock", {})
        self.sku = max(STOCKED_SKUS, key=lambda sku: stock.get(sku, 0))
        left = stock.get(self.sku, 0)
        if left < LOW_STOCK:
            return (
                f"the shop has only {left} units of {self.sku} left; "
                "restart the demo with --reset-shop for fresh stock"
            )
        return None


# --- helpers shared by scenarios ---------------------------------------------------------


def expect(condition: bool, message: str) -> None:
    if not condition:
        raise Unexpected(message)


def expect_status(call: JSON, *statuses: str) -> None:
    expect(
        call["status"] in statuses,
        f"{call['tool']} answered {call['status']} (expected {' or '.join(statuses)}): "
        f"{call.get('feedback') or call.get('error')}",
    )


def waiting_for_reviewer(run_id: str, call: JSON) -> Outcome:
    approval = call.get("approval") or {}
    where = f" at {approval['url']}" if approval.get("url") else ""
    return Outcome(True, f"run {run_id}: {call['tool']} is waiting for a reviewer{where}")


def quote(text: str | None, limit: int = 140) -> str:
    text = " ".join((text or "").split())
    return f"“{text if len(text) <= limit else text[: limit - 1] + '…'}”"


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def order_args(sku: str, amount: str) -> JSON:
    return {"sku": sku, "qty": 1, "amount": amount}


def reason(call: JSON) -> str | None:
    return (call.get("error") or {}).get("reason")


# --- the scenarios ------------------------------------------------------------------------


def happy_path(demo: Demo) -> Outcome:
    """query_stock → reserve_stock → create_order → charge → send_notification → complete."""
    api, run = demo.api, demo.new_run("happy")
    stock = api.call(run, 0, "query_stock", {"sku": demo.sku}, tool_call_id="tc-stock")
    expect_status(stock, "succeeded")
    reserve = api.call(
        run, 1, "reserve_stock", {"sku": demo.sku, "qty": 1},
        tool_call_id="tc-reserve", depends_on=["tc-stock"],
    )  # fmt: skip
    expect_status(reserve, "succeeded")
    order = api.call(
        run, 2, "create_order", order_args(demo.sku, "199.00"),
        tool_call_id="tc-order", depends_on=["tc-reserve"],
    )  # fmt: skip
    if order["status"] == "pending_approval":
        return waiting_for_reviewer(run, order)
    expect_status(order, "succeeded")
    order_id = order["result"]["order_id"]
    charge = api.call(
        run, 3, "charge", {"order_id": order_id, "amount": "199.00"},
        tool_call_id="tc-charge", depends_on=["tc-order"],
    )  # fmt: skip
    if charge["status"] == "pending_approval":
        return waiting_for_reviewer(run, charge)
    expect_status(charge, "succeeded")
    note = api.call(
        run, 4, "send_notification",
        {"to": CUSTOMER, "message": f"Order {order_id} is confirmed and paid."},
        tool_call_id="tc-notify", depends_on=["tc-charge"],
    )  # fmt: skip
    if note["status"] == "pending_approval":
        return waiting_for_reviewer(run, note)
    expect_status(note, "succeeded")
    ended = api.run_complete(run)
    expect(ended["status"] == "completed", f"run is {ended['status']} after complete")
    return Outcome(True, f"run {run} completed ({plural(len(ended['calls']), 'call')})")


def lost_response(demo: Demo) -> Outcome:
    """The order is created but its response is lost: ToolOps must not order twice."""
    api, shop, run = demo.api, demo.shop, demo.new_run("lost-response")
    with shop.fault("/orders", drop_after_commit=1):
        call = api.call(run, 0, "create_order", order_args(demo.sku, "49.90"), tool_call_id="tc-1")
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
    api, shop, run = demo.api, demo.shop, demo.new_run("charge-timeout")
    order = api.call(run, 0, "create_order", order_args(demo.sku, "75.00"), tool_call_id="tc-1")
    if order["status"] == "pending_approval":
        return waiting_for_reviewer(run, order)
    expect_status(order, "succeeded")
    order_id = order["result"]["order_id"]
    with shop.fault("/payments/charges", timeout_next=1, hang_s=3):
        charge = api.call(
            run, 1, "charge", {"order_id": order_id, "amount": "75.00"},
            tool_call_id="tc-2", depends_on=["tc-1"],
        )  # fmt: skip
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


def abort(demo: Demo) -> Outcome:
    """Reserve, then abandon the run: its compensations are handed to the worker."""
    api, shop, run = demo.api, demo.shop, demo.new_run("abort")
    reserve = api.call(run, 0, "reserve_stock", {"sku": demo.sku, "qty": 1}, tool_call_id="tc-1")
    expect_status(reserve, "succeeded")
    reservation_id = reserve["result"]["reservation_id"]
    ended = api.run_abort(run, "demo: the customer changed their mind")
    expect(ended["status"] in ("aborting", "aborted"), f"abort answered {ended['status']}")
    deadline = time.monotonic() + 10
    while ended["status"] == "aborting" and time.monotonic() < deadline:
        time.sleep(0.5)
        ended = api.run_get(run)
    expect(ended["status"] in ("aborting", "aborted"), f"the run ended {ended['status']}")
    undo = ", ".join(f"{c['tool']} {c['status']}" for c in ended.get("compensations") or [])
    held = [r for r in shop.state()["reservations"] if r["reservation_id"] == reservation_id]
    stock = held[0]["status"] if held else "missing"
    return Outcome(
        True,
        f"run {run} {ended['status']}; compensations: {undo or 'none registered'}; "
        f"reservation {reservation_id} is {stock}",
    )


def dependency(demo: Demo) -> Outcome:
    """A call that depends on a failed call is skipped, and nothing is sent."""
    api, shop, run = demo.api, demo.shop, demo.new_run("dependency")
    lookup = api.call(run, 0, "query_stock", {"sku": "NO-SUCH-SKU"}, tool_call_id="tc-1")
    expect_status(lookup, "failed")
    reserve = api.call(
        run, 1, "reserve_stock", {"sku": demo.sku, "qty": 1},
        tool_call_id="tc-2", depends_on=["tc-1"],
    )  # fmt: skip
    expect_status(reserve, "skipped")
    reason = (reserve["error"] or {}).get("reason")
    expect(reason == "dependency_failed", f"skipped with reason {reason}")
    expect(
        not shop.requests_for_run("/inventory/reservations", run),
        "the skipped reservation reached the shop",
    )
    summary = api.run_complete(run)["summary"]
    return Outcome(
        True,
        f"run {run}: query_stock failed (unknown SKU), reserve_stock skipped; "
        f"summary {quote(summary, 80)}",
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
    api, shop, run = demo.api, demo.shop, demo.new_run("unknown-charge")
    order = api.call(run, 0, "create_order", order_args(demo.sku, "12.50"), tool_call_id="tc-1")
    if order["status"] == "pending_approval":
        return waiting_for_reviewer(run, order)
    expect_status(order, "succeeded")
    order_id = order["result"]["order_id"]
    with (
        shop.fault("/payments/charges", drop_after_commit=1),
        shop.fault("/payments/charges/lookup", fail_next=50, fail_status=500),
    ):
        charge = api.call(
            run, 1, "charge", {"order_id": order_id, "amount": "12.50"},
            tool_call_id="tc-2", depends_on=["tc-1"],
        )  # fmt: skip
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


def degraded_search(demo: Demo) -> Outcome:
    """search_products is down: with allow_partial its call ends degraded, not failed, and
    a query_stock that depends on it still runs."""
    api, shop, run = demo.api, demo.shop, demo.new_run("degraded-search")
    with shop.fault("/catalog/search", fail_next=5, fail_status=503):
        search = api.call(run, 0, "search_products", {"q": "coffee"}, tool_call_id="tc-1")
    expect_status(search, "degraded")
    stock = api.call(
        run, 1, "query_stock", {"sku": demo.sku}, tool_call_id="tc-2", depends_on=["tc-1"]
    )
    expect_status(stock, "succeeded")
    summary = api.run_complete(run)["summary"]
    expect(summary.startswith("Based on partial data"), f"the summary is {quote(summary)}")
    return Outcome(
        True,
        f"run {run}: search_products degraded after {plural(search['attempts'], 'attempt')} "
        f"{quote(search['feedback'], 90)}; query_stock (depends_on it) still ran: "
        f"{stock['result']['available']} units of {demo.sku}; summary {quote(summary, 100)}",
    )


def partial_summary(demo: Demo) -> Outcome:
    """Three calls succeed and two fail: the run's summary says so in its first sentence."""
    api, run = demo.api, demo.new_run("partial-summary")
    plan: list[tuple[str, JSON]] = [
        ("query_stock", {"sku": demo.sku}),
        ("search_products", {"q": "coffee"}),
        ("query_stock", {"sku": "NO-SUCH-SKU"}),  # the shop answers 404
        ("query_stock", {"sku": STOCKED_SKUS[1]}),
        ("reserve_stock", {"sku": demo.sku, "qty": 1_000_000}),  # more than in stock: 409
    ]
    calls = [
        api.call(run, step, tool, args, tool_call_id=f"tc-{step + 1}")
        for step, (tool, args) in enumerate(plan)
    ]
    statuses = [c["status"] for c in calls]
    expected = ["succeeded", "succeeded", "failed", "succeeded", "failed"]
    expect(statuses == expected, f"the calls ended {statuses}, not {expected}")
    ended = api.run_complete(run)
    summary = ended["summary"]
    expect(
        summary.startswith("Based on partial data: 3 of 5"),
        f"the summary does not start with “Based on partial data: 3 of 5”: {quote(summary)}",
    )
    return Outcome(
        True,
        f"run {run}: 3 calls succeeded, 2 failed; last succeeded "
        f"{ended['last_succeeded_tool_call_id']}; summary {quote(summary, 220)}",
    )


Scenario = Callable[[Demo], Outcome]
SCENARIOS: list[tuple[str, Scenario]] = [
    ("happy-path order", happy_path),
    ("lost response", lost_response),
    ("charge timeout", charge_timeout),
    ("flaky read", flaky_read),
    ("rate-limited read", rate_limited),
    ("replay", replay),
    ("bad input", bad_input),
    ("budget", budget),
    ("abort", abort),
    ("dependency", dependency),
    ("circuit breaker", circuit_breaker),
    ("unknown charge", unknown_charge),
    ("degraded search", degraded_search),
    ("partial summary", partial_summary),
]


# --- running them -------------------------------------------------------------------------


def run_scenario(demo: Demo, name: str, scenario: Scenario) -> ScenarioResult:
    """One scenario; an exception is reported as its outcome, never raised."""
    first_run = len(demo.run_ids)
    started = time.monotonic()
    try:
        outcome = scenario(demo)
    except Exception as exc:
        outcome = Outcome(False, f"{type(exc).__name__}: {exc}")
    return ScenarioResult(
        name=name,
        ok=outcome.ok,
        text=outcome.text,
        run_ids=demo.run_ids[first_run:],
        seconds=time.monotonic() - started,
    )


def new_stamp() -> str:
    """Unique per demo run: a timestamp, plus a few random characters for the same second."""
    return f"{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}-{secrets.token_hex(2)}"


def emit(out: TextIO, line: str) -> None:
    # One write with its newline: Django's OutputWrapper would add a second one.
    out.write(line + "\n")
    out.flush()


def run_demo(
    url: str,
    token: str,
    shop_url: str,
    *,
    out: TextIO = sys.stdout,
    only: list[str] | None = None,
) -> list[ScenarioResult]:
    """Run the scenarios (all, or those named in `only`), printing one line each."""
    api, shop = ToolOps(url, token), ShopControl(shop_url)
    demo = Demo(api, shop, new_stamp())
    results: list[ScenarioResult] = []
    try:
        warning = demo.pick_sku()
        if warning:
            emit(out, f"! {warning}")
        for name, scenario in SCENARIOS:
            if only and name not in only and scenario.__name__ not in only:
                continue
            result = run_scenario(demo, name, scenario)
            mark = "✓" if result.ok else "✗"
            emit(out, f"{mark} {name}: {result.text}")
            results.append(result)
    finally:
        api.close()
        shop.close()
    ok = sum(r.ok for r in results)
    emit(out, f"demo agent: {len(results)} scenarios, {ok} ok")
    return results


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m toolops.demo.agent",
        description="Scripted demo agent: drives the ToolOps executor API over HTTP.",
    )
    parser.add_argument("--url", default="http://127.0.0.1:8000", help="ToolOps base URL")
    parser.add_argument(
        "--token",
        default=os.environ.get("TOOLOPS_AGENT_TOKEN", ""),
        help="agent token (default: $TOOLOPS_AGENT_TOKEN)",
    )
    parser.add_argument("--shop", default="http://127.0.0.1:9000", help="demo shop base URL")
    parser.add_argument(
        "--only",
        action="append",
        metavar="SCENARIO",
        help="run only this scenario (its name or function name); repeatable",
    )
    args = parser.parse_args(argv)
    if not args.token:
        parser.error("an agent token is required: --token or $TOOLOPS_AGENT_TOKEN")
    return args


def main(argv: list[str] | None = None, out: TextIO = sys.stdout) -> int:
    args = _parse_args(argv)
    results = run_demo(args.url, args.token, args.shop, out=out, only=args.only)
    return 0 if results and all(r.ok for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
