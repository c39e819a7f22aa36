"""A purchase run built row by row for the run page's plain-words tests: reserve_stock →
create_order → charge, each with the demo catalog's title, and the undo of each (a
compensation, its undo calls, its ticket) in whatever state a test needs."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from compensations.models import Compensation, Ticket
from tests.conftest import DEMO_PREFIX, write_catalog
from tests.console.conftest import make_call, make_run
from toolops.models import Agent, Run, ToolCall
from toolops.tools import registry

T0 = datetime(2026, 12, 7, 14, 0, 0, tzinfo=UTC)
CUSTOMER = {"currency": "EUR", "customer": "cus_42"}
STEPS = [
    ("reserve_stock", {"sku": "A12", "qty": 1}, {"reservation_id": "res_1"}),
    (
        "create_order",
        {"sku": "A12", "qty": 1, "amount": "89.00", **CUSTOMER},
        {"order_id": "ord_1"},
    ),
    ("charge", {"order_id": "ord_1", "amount": "89.00", **CUSTOMER}, {"charge_id": "ch_1"}),
]
UNDO = {
    "reserve_stock": ("release_stock", {"reservation_id": "res_1"}),
    "create_order": ("cancel_order", {"order_id": "ord_1"}),
    "charge": ("refund", {"charge_id": "ch_1"}),
}
# The demo catalog's titles (toolops/demo/catalog.toml `summary`) of the calls above.
RESERVE, ORDER = "Reserve 1 × A12", "Order 1 × A12 for 89.00 EUR (customer cus_42)"
CHARGE = "Charge 89.00 EUR to customer cus_42 for order ord_1"
RELEASE, CANCEL, REFUND = (
    "Release stock reservation res_1",
    "Cancel order ord_1",
    "Refund charge ch_1",
)
BOUGHT = f"{RESERVE}; {ORDER}; {CHARGE}"


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


@pytest.fixture
def demo_catalog(settings: Any) -> Iterator[None]:
    """The demo catalog (its titles and undos), loaded for this test."""
    path = write_catalog(DEMO_PREFIX)
    settings.TOOLOPS_TOOLS_FILE = str(path)
    settings.TOOLOPS_POLICY_CACHE_S = 0
    registry.reset()
    yield
    registry.reset()
    path.unlink(missing_ok=True)


def purchase(agent: Agent, run_id: str, status: str, **run: Any) -> tuple[Run, list[ToolCall]]:
    """The three calls of a purchase, succeeded, one a second."""
    made = make_run(agent, run_id, status=status, created_at=T0, **run)
    calls = [
        make_call(
            made,
            f"tc-{i}",
            i,
            tool,
            "succeeded",
            args=args,
            result=result,
            created_at=at(i),
            finished_at=at(i + 0.5),
            attempts=1,
        )
        for i, (tool, args, result) in enumerate(STEPS, start=1)
    ]
    return made, calls


def undo(
    call: ToolCall, status: str, *, rounds: tuple[str, ...] = (), ticket: str = ""
) -> Compensation:
    """The compensation of `call` in `status`, after one undo call per round (each round's
    status), with a ticket in state `ticket` when given. Newest first on the page: make
    them in the order the calls were made."""
    tool, args = UNDO[call.tool]
    compensation = Compensation.objects.create(
        run=call.run,
        call=call,
        tool=tool,
        args=args,
        key=f"{call.pk}".rjust(64, "k"),
        status=status,
        rounds=len(rounds),
    )
    last = None
    for number, outcome in enumerate(rounds, start=1):
        last = make_call(
            call.run,
            f"~undo:{call.call_id}:{number}",
            call.step_index,
            tool,
            outcome,
            role=ToolCall.Role.UNDO,
            args=args,
            created_at=at(10 + call.step_index + number),
            finished_at=at(10.5 + call.step_index + number),
            attempts=1,
            error_class="retry" if outcome == "failed" else "",
            error_reason="downstream_error" if outcome == "failed" else "",
            error_message="HTTP 503: injected_fault" if outcome == "failed" else "",
        )
    if last is not None:
        compensation.undo_call = last
        compensation.save(update_fields=["undo_call"])
    if ticket:
        Ticket.objects.create(
            compensation=compensation,
            run=call.run,
            tool=tool,
            reason=Ticket.Reason.DEAD_LETTERED,
            status=ticket,
        )
    return compensation
