"""What a demo scenario is written with: the Demo it is handed (both clients, fresh run
ids, a stocked SKU), the Outcome it returns, and the checks that turn a surprise into
an `Unexpected` — reported on the scenario's line, never raised past it."""

from __future__ import annotations

from dataclasses import dataclass

from toolops.demo.clients import JSON, ShopControl, ToolOps, Unexpected

CUSTOMER = "customer@example.com"
# SKUs seeded in the shop with enough stock for reservations; the fullest one is used.
STOCKED_SKUS = ("A12", "D9")
LOW_STOCK = 10


@dataclass
class Outcome:
    ok: bool
    text: str


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
