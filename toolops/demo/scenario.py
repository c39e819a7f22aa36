"""What a demo scenario is written with: the Demo it is handed (both clients, fresh run
ids, a stocked SKU), the Outcome it returns, and the checks that turn a surprise into
an `Unexpected` — reported on the scenario's line, never raised past it."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from toolops.demo.clients import JSON, ShopControl, ToolOps, Unexpected
from toolops.demo.reviewer import NOTE, auto_metadata

CUSTOMER = "customer@example.com"
# The business facts an order and its charge carry, as a shop's agent would send them:
# the catalog's summaries title the calls with them ("Charge 89.00 EUR to customer
# cus_4821 for order ord_…"), and the e-mail is searchable (by its HMAC, never stored plain).
CURRENCY = "EUR"
CUSTOMER_ID = "cus_4821"
# SKUs seeded in the shop with enough stock for reservations; the fullest one is used.
STOCKED_SKUS = ("A12", "D9")
LOW_STOCK = 10
# How long a scenario waits for the scripted reviewer (and the worker that then executes
# the call) before it reports the call as still waiting.
REVIEW_WAIT_S = 30.0
WAITING = ("pending_approval", "in_progress")


@dataclass
class Outcome:
    ok: bool
    text: str


class Demo:
    """What every scenario shares: the two clients, a stamp for fresh run ids, a SKU."""

    def __init__(
        self,
        api: ToolOps,
        shop: ShopControl,
        stamp: str,
        report: Callable[[str], None] | None = None,
        cashier: ToolOps | None = None,
    ) -> None:
        self.api = api
        # demo-cashier's client (the daily-limit scenario); None without its token.
        self.cashier = cashier
        self.shop = shop
        self.stamp = stamp
        self.sku = STOCKED_SKUS[0]
        self.run_ids: list[str] = []
        # Prints a line of the demo's output; the approval watchers use it from their
        # threads, after the scenario's own line.
        self.report = report or (lambda line: print(line, file=sys.stdout, flush=True))
        self.watchers: list[threading.Thread] = []
        self._number = 0
        self._sessions = 0

    def new_session(self) -> str:
        """A session key of its own, for runs that share one (one conversation)."""
        self._sessions += 1
        return f"demo-{self.stamp}-session-{self._sessions}"

    def new_run(
        self,
        slug: str,
        budget: JSON | None = None,
        *,
        auto_review: bool = False,
        session_key: str | None = None,
        api: ToolOps | None = None,
    ) -> str:
        """A fresh run with its own session key (or `session_key`); re-running the demo
        makes new runs. `auto_review`: the demo's scripted reviewer approves what its
        calls wait for (toolops/demo/reviewer.py); otherwise a person decides. `api`:
        another agent's client opens it (demo-cashier's), else demo-agent's."""
        self._number += 1
        run_id = f"demo-{self.stamp}-{self._number}-{slug}"
        session_key = session_key or f"demo-{self.stamp}-s{self._number}"
        metadata = auto_metadata() if auto_review else None
        (api or self.api).run_create(run_id, session_key, budget, metadata)
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


def reviewed(api: ToolOps, call: JSON) -> JSON:
    """A call that waits for a reviewer, long-polled (GET /calls/{id}?wait=…) until it is
    decided and, when approved, executed by the worker; as it is after REVIEW_WAIT_S if
    nobody decided by then. Any other call as it is."""
    deadline = time.monotonic() + REVIEW_WAIT_S
    while call["status"] in WAITING:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        call = api.call_get(call["call_id"], wait=min(30.0, left))
    return call


def waiting_for_reviewer(run_id: str, call: JSON) -> Outcome:
    """A call of an auto-reviewed run that nobody approved within REVIEW_WAIT_S."""
    approval = call.get("approval") or {}
    where = f" at {approval['url']}" if approval.get("url") else ""
    return Outcome(
        True,
        f"run {run_id}: {call['tool']} is waiting for a reviewer{where} (undecided after "
        f"{REVIEW_WAIT_S:g} s: is the scripted reviewer running? python -m "
        "toolops.demo.reviewer)",
    )


def approved_by(*calls: JSON) -> str:
    """“create_order and charge approved by reviewer (the demo's scripted reviewer)”."""
    tools = [c["tool"] for c in calls if (c.get("approval") or {}).get("status") == "approved"]
    if not tools:
        return "no approval needed"
    approval = next(c["approval"] for c in calls if c["tool"] == tools[-1])
    who = approval.get("decided_by") or "a reviewer"
    how = " (the demo's scripted reviewer)" if approval.get("note") == NOTE else ""
    return f"{' and '.join(tools)} approved by {who}{how}"


def quote(text: str | None, limit: int = 140) -> str:
    text = " ".join((text or "").split())
    return f"“{text if len(text) <= limit else text[: limit - 1] + '…'}”"


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def customer_facts() -> JSON:
    """Who pays, and in what: the args every create_order and charge of the demo carry."""
    return {"currency": CURRENCY, "customer": CUSTOMER_ID, "email": CUSTOMER}


def order_args(sku: str, amount: str) -> JSON:
    return {"sku": sku, "qty": 1, "amount": amount, **customer_facts()}


def charge_args(order_id: str, amount: str) -> JSON:
    return {"order_id": order_id, "amount": amount, **customer_facts()}


def reason(call: JSON) -> str | None:
    return (call.get("error") or {}).get("reason")
