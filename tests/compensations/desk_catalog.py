"""A catalog for the desk's customer sentence and contact: the demo's shop (a stock
reservation, an order, a charge, each with its undo, and a read), its args declared so
the money and the contact come from the catalog. Nothing is called: runs are built with
the ORM (`bought`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from compensations.models import Compensation, Ticket
from compensations.services import compensation_finish, run_conclude
from tests.console.conftest import make_attempt, make_call, make_run
from toolops.models import Agent, Run, ToolCall
from toolops.tools import registry

DESK_CATALOG = """
[[tool]]
name = "query_stock"
kind = "read"
url = "http://127.0.0.1:9/inventory/stock"
params_schema = { type = "object" }

[[tool]]
name = "reserve_stock"
kind = "compensable_write"
url = "http://127.0.0.1:9/inventory/reservations"
compensation = { tool = "release_stock", args = { reservation_id = "$.result.reservation_id" } }
params_schema = { type = "object" }

[[tool]]
name = "release_stock"
kind = "idempotent_write"
internal = true
url = "http://127.0.0.1:9/inventory/reservations/release"
params_schema = { type = "object" }

[[tool]]
name = "create_order"
kind = "compensable_write"
url = "http://127.0.0.1:9/orders"
compensation = { tool = "cancel_order", args = { order_id = "$.result.order_id" } }
summary = "Order {qty} × {sku}"
contact = ["email"]
params_schema.type = "object"
params_schema.properties.sku = { type = "string" }
params_schema.properties.qty = { type = "integer" }
params_schema.properties.email = { type = "string" }

[[tool]]
name = "cancel_order"
kind = "idempotent_write"
internal = true
url = "http://127.0.0.1:9/orders/cancel"
params_schema = { type = "object" }

[[tool]]
name = "charge"
kind = "irreversible"
url = "http://127.0.0.1:9/payments/charges"
compensation = { tool = "refund", args = { charge_id = "$.result.charge_id" } }
summary = "Charge {total} {currency} for order {order_id}"
contact = ["email"]
params_schema.type = "object"
params_schema.properties.order_id = { type = "string" }
params_schema.properties.total = { type = "string", format = "decimal" }
params_schema.properties.currency = { type = "string" }
params_schema.properties.email = { type = "string" }

[[tool]]
name = "refund"
kind = "idempotent_write"
internal = true
url = "http://127.0.0.1:9/payments/refunds"
summary = "Refund charge {charge_id}"
params_schema = { type = "object" }
"""

EMAIL = "ann.customer@example.com"


@pytest.fixture
def desk_catalog(settings: Any, tmp_path: Path) -> Iterator[dict[str, Any]]:
    """DESK_CATALOG as this test's tool catalog."""
    path = tmp_path / "desk-catalog.toml"
    path.write_text(DESK_CATALOG)
    settings.TOOLOPS_TOOLS_FILE = str(path)
    settings.TOOLOPS_POLICY_CACHE_S = 0
    registry.reset()
    yield registry.load()
    registry.reset()


def bought(agent: Agent, run_id: str = "r-buy", *, email: str = EMAIL) -> Run:
    """An aborting run: a stock query, a reservation, an order and a charge (the money in
    `total`, as the catalog declares it), each write with its undo registered."""
    run = make_run(agent, run_id, status="aborting")
    make_call(run, f"{run_id}-q", 0, "query_stock", "succeeded", result={"available": 3})
    writes = [
        (
            "reserve_stock",
            {"sku": "A12", "qty": 1},
            {"reservation_id": "res_1"},
            "release_stock",
            {"reservation_id": "res_1"},
        ),
        (
            "create_order",
            {"sku": "A12", "qty": 1, "email": email},
            {"order_id": "ord_1"},
            "cancel_order",
            {"order_id": "ord_1"},
        ),
        (
            "charge",
            {"order_id": "ord_1", "total": "89.00", "currency": "EUR", "email": email},
            {"charge_id": "ch_1", "order_id": "ord_1"},
            "refund",
            {"charge_id": "ch_1"},
        ),
    ]
    for step, (tool, args, result, undo, undo_args) in enumerate(writes, start=1):
        call = make_call(run, f"{run_id}-{step}", step, tool, "succeeded", args=args, result=result)
        Compensation.objects.create(
            run=run,
            call=call,
            tool=undo,
            args=undo_args,
            key=f"{step}" * 64,
            status=Compensation.Status.PENDING,
        )
    return run


def undo_round(
    compensation: Compensation, *, ok: bool, result: Any = None, error: str = "HTTP 503: x"
) -> None:
    """One round of `compensation`'s undo, ended as the worker ends it (services.py)."""
    Compensation.objects.filter(pk=compensation.pk).update(
        status=Compensation.Status.RUNNING, rounds=compensation.rounds + 1
    )
    compensation.refresh_from_db()
    undo = make_call(
        compensation.run,
        f"~undo:{compensation.call.call_id}:{compensation.rounds}",
        0,
        compensation.tool,
        "succeeded" if ok else "failed",
        role=ToolCall.Role.UNDO,
        attempts=1,
        result=result,
        error_message="" if ok else error,
    )
    make_attempt(undo, 1, tool=compensation.tool, outcome="ok" if ok else "retry")
    compensation_finish(compensation=compensation, undo=undo)


def refund_dead_lettered(agent: Agent, run_id: str = "r-buy") -> Ticket:
    """`bought`, then the worker undoes it newest first: the refund fails (a ticket
    opens), the order is cancelled and the reservation released."""
    run = bought(agent, run_id)
    for compensation in Compensation.objects.filter(run=run).order_by("-pk"):
        undo_round(compensation, ok=compensation.tool != "refund")
    run_conclude(run_pk=run.pk)
    return Ticket.objects.get(compensation__tool="refund", run=run)
