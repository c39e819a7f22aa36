"""Crash points in the worker (toolops/crash.py): the saga between an undo's record and
its compensation's, and an approved call between its start and its first attempt. The
worker dies by SIGKILL there; the next one finishes the work exactly once."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from unittest.mock import patch

import pytest
from rest_framework.test import APIClient

from compensations.models import Compensation
from compensations.tasks import compensate_run
from tests.conftest import Shop
from tests.console.conftest import make_user
from tests.toolops.executor.helpers import call_ok, start_run
from tests.waiting import wait_until
from toolops.approvals.services import approval_decide
from toolops.models import Approval, Run, ToolCall
from toolops.tasks import execute_approved_call

from .crashing import FAST, SETTLE_WITHIN_S, record_of, settled, worker_killed_at

RELEASE, CHARGES = "/inventory/reservations/release", "/payments/charges"


@pytest.fixture
def lost_messages() -> Iterator[None]:
    """This process's wake-ups go nowhere: only the worker's sweeps find the work."""
    with (
        patch.object(compensate_run, "delay", autospec=True),
        patch.object(execute_approved_call, "delay", autospec=True),
    ):
        yield


def test_mid_compensation_the_recorded_undo_settles_its_compensation_without_a_resend(
    worker: Any, api: APIClient, shop: Shop, lost_messages: None
) -> None:
    start_run(api)
    reserved = call_ok(api, step_index=1, tool="reserve_stock", args={"sku": "A12", "qty": 2})
    assert shop.state()["stock"]["A12"] == 48
    response = api.post("/api/v1/runs/r-1/abort", {"reason": "customer left"}, format="json")
    assert response.status_code == 202, response.content

    worker_killed_at(worker(TOOLOPS_CRASH_AT="mid-compensation", **FAST), "mid-compensation")
    # The undo went out and was recorded; its compensation was left running.
    [release] = shop.requests(RELEASE)
    assert release["status"] == 200
    undo = ToolCall.objects.get(role=ToolCall.Role.UNDO)
    assert undo.status == ToolCall.Status.SUCCEEDED
    assert record_of(undo).state == "recorded"
    compensation = Compensation.objects.get()
    assert (compensation.status, compensation.undo_call) == ("running", None)
    assert Run.objects.get().status == Run.Status.ABORTING

    restarted = worker(**FAST)
    wait_until(
        lambda: Run.objects.get().status != Run.Status.ABORTING,
        SETTLE_WITHIN_S,
        failure=restarted.output,
    )

    assert Run.objects.get().status == Run.Status.ABORTED
    compensation.refresh_from_db()
    assert compensation.status == Compensation.Status.SUCCEEDED
    assert compensation.undo_call_id == undo.pk  # the recorded round, not a new one
    assert compensation.rounds == 1
    assert ToolCall.objects.filter(role=ToolCall.Role.UNDO).count() == 1
    assert len(shop.requests(RELEASE)) == 1
    [reservation] = shop.state()["reservations"]
    assert reservation["reservation_id"] == reserved["result"]["reservation_id"]
    assert reservation["status"] == "released"
    assert shop.state()["stock"]["A12"] == 50


def test_after_decision_an_approved_charge_started_by_a_dead_worker_runs_once(
    worker: Any, api: APIClient, shop: Shop, django_user_model: Any, lost_messages: None
) -> None:
    start_run(api)
    response = api.post(
        "/api/v1/runs/r-1/calls",
        {"step_index": 0, "tool": "charge", "args": {"order_id": "ord-d1", "amount": "99.00"}},
        format="json",
    )
    assert response.status_code == 202, response.content
    approval = Approval.objects.get()
    rita = make_user(django_user_model, "rita", "reviewers")
    approval_decide(approval=approval, by=rita, approve=True, note="", args_hash=approval.args_hash)

    # The approvals sweep starts it (its wake-up was lost); the worker dies right after.
    worker_killed_at(worker(TOOLOPS_CRASH_AT="after-decision", **FAST), "after-decision")
    approval.refresh_from_db()
    assert approval.execution_started_at is not None  # started: no sweep starts it again
    call = ToolCall.objects.get()
    assert call.status == ToolCall.Status.IN_PROGRESS
    assert (record_of(call).state, record_of(call).fence) == ("claimed", 2)
    assert shop.requests() == []

    done = settled(call.call_id, worker(**FAST))

    assert done.status == ToolCall.Status.SUCCEEDED
    [charge] = shop.state()["charges"]
    assert charge["order_id"] == "ord-d1"
    assert done.result["charge_id"] == charge["charge_id"]
    assert len(shop.requests(CHARGES)) == 1
    assert (record_of(call).state, record_of(call).fence) == ("recorded", 3)
    approval.refresh_from_db()
    assert approval.status == Approval.Status.APPROVED
