"""Registration (never a success without its undo), complete → discarded, abort → the
worker's task in reverse order, and late registrations — the saga's database side, with
the task body called directly (the real worker is in test_saga_worker.py)."""

from __future__ import annotations

from typing import Any
from unittest.mock import patch

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from compensations.models import Compensation, Ticket
from compensations.tasks import compensate_run
from tests.conftest import Shop, write_catalog
from tests.toolops.api.helpers import assert_problem, body, create_run, post_call
from tests.toolops.executor.helpers import allow_without_approval
from toolops.models import Run, ToolCall
from toolops.tools import registry

pytestmark = pytest.mark.django_db

ORDER = {"sku": "A12", "qty": 1, "amount": "19.90"}
UNDO_PATHS = ("/payments/refunds", "/orders/cancel", "/inventory/reservations/release")


def succeed(api: APIClient, step: int, tool: str, args: dict[str, Any], tc: str) -> dict:
    response = post_call(api, step_index=step, tool=tool, args=args, tool_call_id=tc)
    answer = body(response)
    assert answer["status"] == "succeeded", answer
    return answer


def three_writes(api: APIClient) -> dict[str, Any]:
    allow_without_approval("create_order", "charge")
    create_run(api)
    reserve = succeed(api, 0, "reserve_stock", {"sku": "A12", "qty": 1}, "tc-reserve")
    order = succeed(api, 1, "create_order", ORDER, "tc-order")
    charge = succeed(
        api, 2, "charge", {"order_id": order["result"]["order_id"], "amount": "19.90"}, "tc-charge"
    )
    return {"reserve": reserve, "order": order, "charge": charge}


def undo_requests(shop: Shop) -> list[str]:
    return [r["path"] for r in shop.requests() if r["path"] in UNDO_PATHS]


def test_it_registers_each_undo_with_args_mapped_from_the_result(
    api: APIClient, shop: Shop
) -> None:
    calls = three_writes(api)

    run = body(api.get("/api/v1/runs/r-1"))

    assert run["compensations"] == [
        {"tool": "release_stock", "status": "registered", "for_tool_call_id": "tc-reserve"},
        {"tool": "cancel_order", "status": "registered", "for_tool_call_id": "tc-order"},
        {"tool": "refund", "status": "registered", "for_tool_call_id": "tc-charge"},
    ]
    args = dict(Compensation.objects.values_list("tool", "args"))
    assert args["release_stock"] == {"reservation_id": calls["reserve"]["result"]["reservation_id"]}
    assert args["cancel_order"] == {"order_id": calls["order"]["result"]["order_id"]}
    assert args["refund"] == {"charge_id": calls["charge"]["result"]["charge_id"]}
    assert undo_requests(shop) == []


def test_it_registers_nothing_for_a_failed_write_or_a_read(api: APIClient, shop: Shop) -> None:
    create_run(api)
    shop.fault("/inventory/reservations", fail_next=10, fail_status=400)
    failed = body(post_call(api, step_index=0, tool="reserve_stock", args={"sku": "A12", "qty": 1}))
    read = body(post_call(api, step_index=1, tool="query_stock", args={"sku": "A12"}))

    assert (failed["status"], read["status"]) == ("failed", "succeeded")
    assert not Compensation.objects.exists()
    assert body(api.get("/api/v1/runs/r-1"))["compensations"] == []


@pytest.mark.skipif(connection.vendor != "postgresql", reason="statement counts are PostgreSQL's")
def test_a_compensable_write_still_costs_three_statements(
    api: APIClient, shop: Shop, settings: Any
) -> None:
    settings.TOOLOPS_POLICY_CACHE_S = 60  # as deployed: policies are cached per process
    create_run(api)
    post_call(api, step_index=0, tool="query_stock", args={"sku": "A12"})  # warm caches

    with CaptureQueriesContext(connection) as ctx:
        answer = body(
            post_call(api, step_index=1, tool="reserve_stock", args={"sku": "A12", "qty": 1})
        )

    assert answer["status"] == "succeeded"
    # The savepoints are the test's own transaction around the claim
    # (executor/statements/claim.py), absent in autocommit as deployed.
    statements = [
        q["sql"] for q in ctx.captured_queries if "SAVEPOINT" not in q["sql"].split(" ", 2)[:2]
    ]
    assert len(statements) == 3, "\n".join(s[:120] for s in statements)
    assert not any(s.strip().upper() in ("BEGIN", "COMMIT") for s in statements)
    # The record statement carries the registration.
    assert "compensations_compensation" in statements[-1]
    assert Compensation.objects.get().tool == "release_stock"


def use_unmappable_tool(shop: Shop, settings: Any) -> None:
    catalog = write_catalog(
        shop.url,
        f"""
[[tool]]
name = "reserve_odd"
kind = "compensable_write"
description = "A reservation whose undo maps a field the result never has."
url = "{shop.url}/inventory/reservations"
idempotency_header = true
compensation = {{ tool = "release_stock", args = {{ reservation_id = "$.result.booking_ref" }} }}
params_schema = {{ type = "object", required = ["sku", "qty"] }}
""",
    )
    settings.TOOLOPS_TOOLS_FILE = str(catalog)
    registry.reset()


def test_an_unmappable_undo_opens_a_ticket_at_once(
    api: APIClient, shop: Shop, settings: Any
) -> None:
    use_unmappable_tool(shop, settings)
    create_run(api)

    answer = succeed(api, 0, "reserve_odd", {"sku": "A12", "qty": 1}, "tc-odd")

    compensation = Compensation.objects.get()
    assert "$.result.booking_ref" in compensation.problem
    ticket = Ticket.objects.get(compensation=compensation)
    assert (ticket.status, ticket.reason) == ("open", "unmappable")
    assert answer["feedback"]
    assert body(api.get("/api/v1/runs/r-1"))["compensations"][0]["status"] == "registered"


def test_an_unmappable_undo_is_dead_lettered_on_abort_without_sending(
    api: APIClient, shop: Shop, settings: Any
) -> None:
    use_unmappable_tool(shop, settings)
    create_run(api)
    succeed(api, 0, "reserve_odd", {"sku": "A12", "qty": 1}, "tc-odd")
    api.post("/api/v1/runs/r-1/abort", {"reason": "stop"}, format="json")

    assert compensate_run(Run.objects.get(run_id="r-1").pk) == "compensation_failed"

    compensation = Compensation.objects.get()
    assert compensation.status == "dead_lettered"
    assert "$.result.booking_ref" in compensation.last_error
    assert shop.requests("/inventory/reservations/release") == []
    ticket = Ticket.objects.get()
    assert ticket.status == "open"
    assert list(ticket.events.values_list("kind", flat=True)) == ["opened", "dead_lettered"]


def test_an_unmappable_undo_closes_its_ticket_when_the_run_completes(
    api: APIClient, shop: Shop, settings: Any
) -> None:
    use_unmappable_tool(shop, settings)
    create_run(api)
    succeed(api, 0, "reserve_odd", {"sku": "A12", "qty": 1}, "tc-odd")

    api.post("/api/v1/runs/r-1/complete")

    assert Compensation.objects.get().status == "discarded"
    ticket = Ticket.objects.get()
    assert ticket.status == "closed"
    assert ticket.events.last().text == "The run completed: its undo was never needed."


def test_complete_discards_and_nothing_is_ever_sent(api: APIClient, shop: Shop) -> None:
    from compensations.services import runs_needing_work

    three_writes(api)

    response = api.post("/api/v1/runs/r-1/complete")

    assert response.status_code == 200
    assert {c["status"] for c in body(response)["compensations"]} == {"discarded"}
    run = Run.objects.get(run_id="r-1")
    # Neither the sweep nor a stray task message finds anything to do.
    assert runs_needing_work(grace_s=0) == []
    compensate_run(run.pk)
    assert undo_requests(shop) == []
    run.refresh_from_db()
    assert run.status == "completed"


def test_abort_enqueues_the_worker_on_commit_and_it_undoes_newest_first(
    api: APIClient, shop: Shop, django_capture_on_commit_callbacks: Any
) -> None:
    calls = three_writes(api)
    with (
        patch("compensations.tasks.compensate_run.delay", autospec=True) as delay,
        django_capture_on_commit_callbacks(execute=True),
    ):
        response = api.post("/api/v1/runs/r-1/abort", {"reason": "customer left"}, format="json")

    assert response.status_code == 202
    aborting = body(response)
    assert aborting["status"] == "aborting"
    assert aborting["ended_at"] is None
    assert {c["status"] for c in aborting["compensations"]} == {"pending"}
    run = Run.objects.get(run_id="r-1")
    delay.assert_called_once_with(run.pk)
    assert undo_requests(shop) == []  # nothing is sent inside the request

    assert compensate_run(run.pk) == "aborted"

    assert undo_requests(shop) == list(UNDO_PATHS)
    [refund] = shop.requests("/payments/refunds")
    assert refund["body"]["charge_id"] == calls["charge"]["result"]["charge_id"]
    assert refund["headers"]["x-toolops-run-id"] == "r-1"
    assert run.trace_id not in refund["headers"]["traceparent"]
    ended = body(api.get("/api/v1/runs/r-1"))
    assert ended["status"] == "aborted" and ended["ended_at"] is not None
    assert {c["status"] for c in ended["compensations"]} == {"succeeded"}
    # The worker's undo calls are not the agent's: not in calls, summary or usage.
    assert [c["tool_call_id"] for c in ended["calls"]] == ["tc-reserve", "tc-order", "tc-charge"]
    assert ended["summary"].startswith("All 3 of 3")
    assert ended["usage"]["attempts"] == 3
    assert ToolCall.objects.filter(role="undo").count() == 3
    # Delivered twice: nothing more is sent.
    assert compensate_run(run.pk) is None
    assert len(undo_requests(shop)) == 3


def test_abort_with_nothing_to_undo_ends_aborted_at_once(api: APIClient, shop: Shop) -> None:
    create_run(api)
    post_call(api, step_index=0, tool="query_stock", args={"sku": "A12"})

    response = api.post("/api/v1/runs/r-1/abort", {"reason": "nothing done"}, format="json")

    assert response.status_code == 202
    assert body(response)["status"] == "aborted"
    assert body(response)["ended_at"] is not None


def test_the_repeat_rules_hold_while_aborting(api: APIClient, shop: Shop) -> None:
    three_writes(api)
    api.post("/api/v1/runs/r-1/abort", {"reason": "first"}, format="json")

    again = api.post("/api/v1/runs/r-1/abort", {"reason": "second"}, format="json")
    complete = api.post("/api/v1/runs/r-1/complete")

    assert again.status_code == 202 and body(again)["status"] == "aborting"
    assert_problem(complete, 409)
    run = Run.objects.get(run_id="r-1")
    assert (run.status, run.end_reason) == ("aborting", "first")
    assert Compensation.objects.filter(status="pending").count() == 3


def test_a_budget_exhausted_run_is_aborted_with_its_undos(api: APIClient, shop: Shop) -> None:
    create_run(api, budget={"max_attempts": 1})
    succeed(api, 0, "reserve_stock", {"sku": "A12", "qty": 1}, "tc-1")
    assert Run.objects.get(run_id="r-1").status == "budget_exhausted"

    response = api.post("/api/v1/runs/r-1/abort", {"reason": "out of budget"}, format="json")

    assert response.status_code == 202 and body(response)["status"] == "aborting"
    run = Run.objects.get(run_id="r-1")
    # The undo is outside the run's budget: an exhausted run must still be undone.
    assert compensate_run(run.pk) == "aborted"
    assert len(shop.requests("/inventory/reservations/release")) == 1


def test_a_call_reconciled_after_the_run_ended_is_undone_too(
    api: APIClient, shop: Shop, django_capture_on_commit_callbacks: Any
) -> None:
    from toolops.executor.settle import call_reconcile

    allow_without_approval("create_order")
    create_run(api)
    shop.fault("/orders", drop_after_commit=1)
    shop.fault("/orders/lookup", fail_next=10, fail_status=500)
    lost = body(post_call(api, step_index=0, tool="create_order", args=ORDER, tool_call_id="tc-1"))
    assert lost["status"] == "unknown"
    api.post("/api/v1/runs/r-1/abort", {"reason": "gave up"}, format="json")
    assert Run.objects.get(run_id="r-1").status == "aborted"  # nothing registered yet
    shop.fault("/orders/lookup")
    call = ToolCall.objects.get(call_id=lost["call_id"])
    ToolCall.objects.filter(pk=call.pk).update(next_reconcile_at="2000-01-01T00:00:00Z")

    with (
        patch("compensations.tasks.compensate_run.delay", autospec=True) as delay,
        django_capture_on_commit_callbacks(execute=True),
    ):
        assert call_reconcile(call_pk=call.pk) == "succeeded"

    run = Run.objects.get(run_id="r-1")
    assert run.status == "aborting"
    delay.assert_called_once_with(run.pk)
    assert compensate_run(run.pk) == "aborted"
    assert len(shop.requests("/orders/cancel")) == 1
    assert shop.state()["orders"][0]["status"] == "cancelled"


def test_a_call_settled_by_a_person_registers_its_undo(api: APIClient, shop: Shop) -> None:
    from toolops.executor.settle import call_settle

    allow_without_approval("create_order")
    create_run(api)
    shop.fault("/orders", drop_after_commit=1)
    shop.fault("/orders/lookup", fail_next=10, fail_status=500)
    lost = body(post_call(api, step_index=0, tool="create_order", args=ORDER, tool_call_id="tc-1"))
    call = ToolCall.objects.get(call_id=lost["call_id"])

    settled = call_settle(
        call=call, by=None, succeeded=True, note="found it", result={"order_id": "o-9"}
    )

    assert settled
    compensation = Compensation.objects.get(call=call)
    assert (compensation.tool, compensation.args) == ("cancel_order", {"order_id": "o-9"})


def test_a_write_in_flight_at_abort_is_undone_when_it_lands(api: APIClient, shop: Shop) -> None:
    from tests.console.conftest import make_call

    create_run(api)
    succeed(api, 0, "reserve_stock", {"sku": "A12", "qty": 1}, "tc-reserve")
    run = Run.objects.get(run_id="r-1")
    # A charge another request is still making (its claim is held, its result not in).
    flying = make_call(
        run,
        "tc-charge",
        1,
        "charge",
        "in_progress",
        idempotency_key="f" * 64,
        args={"order_id": "o-1", "amount": "19.90"},
    )
    api.post("/api/v1/runs/r-1/abort", {"reason": "stop"}, format="json")

    # The older undo runs; the run waits for the write in flight instead of ending.
    assert compensate_run(run.pk) is None
    assert Run.objects.get(pk=run.pk).status == "aborting"
    assert len(shop.requests("/inventory/reservations/release")) == 1

    # The charge lands, registering its undo as the record statement does.
    made = shop.http.post("/payments/charges", json={"order_id": "o-1", "amount": "19.90"})
    charge_id = made.json()["charge_id"]
    ToolCall.objects.filter(pk=flying.pk).update(
        status="succeeded", result={"charge_id": charge_id}
    )
    Compensation.objects.create(
        run=run, call=flying, tool="refund", args={"charge_id": charge_id}, key="g" * 64
    )

    assert compensate_run(run.pk) == "aborted"
    assert Compensation.objects.get(call=flying).status == "succeeded"
    assert [r["body"]["charge_id"] for r in shop.requests("/payments/refunds")] == [charge_id]
