"""The saga end to end (DESIGN.md "Compensation"; API.md "Runs"): a real Celery worker
process undoes an aborted run against the real shop over HTTP, on PostgreSQL. The
database is the queue: the worker is woken by the abort's message, or — when that
message is lost, or the worker died mid-undo — by its periodic sweep."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from unittest.mock import MagicMock

import httpx
import pytest
import redis
from rest_framework.test import APIClient

from compensations.models import Compensation, Ticket, TicketEvent
from tests.conftest import Shop
from tests.console.conftest import logged_in
from tests.redisdb import redis_url
from tests.toolops.executor.helpers import allow_without_approval, call_ok, get_run, start_run
from tests.worker import Worker, wait_for
from toolops.models import Agent, Attempt, Run, ToolCall

STOCK = {"sku": "A12", "qty": 1}
ORDER = {"sku": "A12", "qty": 1, "amount": "19.90"}
REFUND, CANCEL, RELEASE = "/payments/refunds", "/orders/cancel", "/inventory/reservations/release"
UNDO_PATHS = (REFUND, CANCEL, RELEASE)
# API.md: healthy downstreams → `aborted` within 60 s; here the worker starts up too.
SETTLE_WITHIN_S = 30.0
SWEEP_S = 0.5
# A worker that sweeps often and gives up on a message quickly.
FAST_SWEEP = {"TOOLOPS_COMPENSATION_SWEEP_S": str(SWEEP_S), "TOOLOPS_COMPENSATION_GRACE_S": "1"}

StartWorker = Callable[..., Worker]


def buy(api: APIClient, run_id: str = "r-1") -> dict[str, dict[str, Any]]:
    """reserve_stock → create_order → charge, each succeeded: three undos registered."""
    allow_without_approval("create_order", "charge")
    start_run(api, run_id)
    reserved = call_ok(api, run_id, step_index=1, tool="reserve_stock", args=STOCK)
    order = call_ok(api, run_id, step_index=2, tool="create_order", args=ORDER)
    charge_args = {"order_id": order["result"]["order_id"], "amount": "19.90"}
    charged = call_ok(api, run_id, step_index=3, tool="charge", args=charge_args)
    calls = {"reserve_stock": reserved, "create_order": order, "charge": charged}
    assert {name: c["status"] for name, c in calls.items()} == dict.fromkeys(calls, "succeeded")
    return calls


def abort(api: APIClient, run_id: str = "r-1") -> None:
    response = api.post(f"/api/v1/runs/{run_id}/abort", {"reason": "customer left"}, format="json")
    assert response.status_code == 202, response.content
    assert response.json()["status"] == "aborting"


def run_status(run_id: str = "r-1") -> str:
    return Run.objects.get(run_id=run_id).status


def ended(run_id: str = "r-1") -> Callable[[], bool]:
    return lambda: run_status(run_id) not in (Run.Status.RUNNING, Run.Status.ABORTING)


def undo_requests(shop: Shop) -> list[dict[str, Any]]:
    """Every request on an undo path, in order of arrival."""
    return sorted((r for path in UNDO_PATHS for r in shop.requests(path)), key=lambda r: r["at"])


def statuses(run: dict[str, Any]) -> list[tuple[str, str]]:
    return [(c["tool"], c["status"]) for c in run["compensations"]]


def broker_env(broker: str) -> dict[str, str]:
    """The embedded filesystem broker (one machine), or Redis (beyond one machine)."""
    if broker == "embedded":
        return {}
    broker_url = redis_url()
    if not broker_url:
        pytest.skip("TOOLOPS_TEST_REDIS_URL is not set (.ci/run sets it)")
    # This test worker's own database, emptied: no message of an earlier run may reach
    # this worker (tests/redisdb.py).
    redis.Redis.from_url(broker_url).flushdb()
    return {"CELERY_BROKER_URL": broker_url}


@pytest.mark.parametrize("broker", ["embedded", "redis"])
def test_it_undoes_an_aborted_run_newest_first(
    worker: StartWorker,
    toolops_server: Callable[..., Any],
    agent_a: tuple[Agent, str],
    api: APIClient,
    shop: Shop,
    broker: str,
) -> None:
    env = broker_env(broker)
    calls = buy(api)
    # The sweep waits a minute before it steps in: only the abort's message can wake the
    # worker in time. The server shares the worker's broker (the embedded one lives in
    # the data directory).
    w = worker(TOOLOPS_COMPENSATION_GRACE_S="60", **env)
    server = toolops_server(TOOLOPS_DATA_DIR=str(w.data_dir), **env)
    auth = {"Authorization": f"Bearer {agent_a[1]}"}
    with httpx.Client(base_url=server.url, headers=auth, timeout=10) as http:
        response = http.post("/api/v1/runs/r-1/abort", json={"reason": "customer left"})
        assert response.status_code == 202, response.text
        assert response.json()["status"] == "aborting"
        wait_for(
            lambda: http.get("/api/v1/runs/r-1").json()["status"] != "aborting", SETTLE_WITHIN_S, w
        )
        run = http.get("/api/v1/runs/r-1").json()

    assert run["status"] == "aborted"
    assert run["ended_at"] is not None
    assert statuses(run) == [
        ("release_stock", "succeeded"),
        ("cancel_order", "succeeded"),
        ("refund", "succeeded"),
    ]
    # Newest first, each exactly once.
    undos = undo_requests(shop)
    assert [r["path"] for r in undos] == [REFUND, CANCEL, RELEASE]
    assert [r["status"] for r in undos] == [200, 200, 200]
    refund, cancel, release = undos
    assert refund["body"]["charge_id"] == calls["charge"]["result"]["charge_id"]
    assert cancel["body"]["order_id"] == calls["create_order"]["result"]["order_id"]
    assert release["body"]["reservation_id"] == calls["reserve_stock"]["result"]["reservation_id"]
    # Each compensation's spans start a trace of their own; its requests still name the run.
    traces = {c.tool: c.trace_id for c in Compensation.objects.all()}
    for request, tool in zip(undos, ["refund", "cancel_order", "release_stock"], strict=True):
        headers = request["headers"]
        assert headers["x-toolops-run-id"] == "r-1"
        trace_id = headers["traceparent"].split("-")[1]
        assert trace_id != run["trace_id"]
        assert trace_id == traces[tool]
    assert len(set(traces.values())) == 3
    state = shop.state()
    assert [r["charge_id"] for r in state["refunds"]] == [calls["charge"]["result"]["charge_id"]]
    assert [o["status"] for o in state["orders"]] == ["cancelled"]
    assert [r["status"] for r in state["reservations"]] == ["released"]
    # The undo calls are the worker's, not the agent's.
    assert [c["tool"] for c in run["calls"]] == ["reserve_stock", "create_order", "charge"]


def test_it_discards_a_completed_runs_undos_and_never_sends_them(
    worker: StartWorker, api: APIClient, shop: Shop, lost_messages: MagicMock
) -> None:
    buy(api)
    response = api.post("/api/v1/runs/r-1/complete")
    assert response.status_code == 200, response.content
    assert response.json()["status"] == "completed"
    assert {s for _, s in statuses(response.json())} == {"discarded"}
    # A second run, aborted with its message lost: once the sweep has undone it, the
    # sweep has also looked at r-1.
    start_run(api, "r-2")
    call_ok(api, "r-2", step_index=1, tool="reserve_stock", args={"sku": "D9", "qty": 2})
    abort(api, "r-2")

    w = worker(**FAST_SWEEP)
    wait_for(lambda: run_status("r-2") == Run.Status.ABORTED, SETTLE_WITHIN_S, w)
    # And a sweep more: a third run, aborted only now with its message lost, is undone by
    # a later sweep, which has looked at r-1 again.
    start_run(api, "r-3")
    call_ok(api, "r-3", step_index=1, tool="reserve_stock", args={"sku": "D9", "qty": 1})
    abort(api, "r-3")
    wait_for(lambda: run_status("r-3") == Run.Status.ABORTED, SETTLE_WITHIN_S, w)

    run = get_run(api)
    assert run["status"] == "completed"
    assert {s for _, s in statuses(run)} == {"discarded"}
    assert [r["headers"]["x-toolops-run-id"] for r in undo_requests(shop)] == ["r-2", "r-3"]
    assert not ToolCall.objects.filter(run__run_id="r-1", role=ToolCall.Role.UNDO).exists()
    state = shop.state()
    assert state["refunds"] == []
    assert [o["status"] for o in state["orders"]] == ["created"]
    reservations = sorted(r["status"] for r in state["reservations"])
    assert reservations == ["released", "released", "reserved"]


def crash_mid_request(worker: StartWorker, shop: Shop, path: str) -> Worker:
    """Start a worker on the aborted run, SIGKILL it while its request to `path` hangs,
    and start another; the latter is returned. Both hold claims on a short lease, so the
    survivor may take the dead one's claim over soon."""
    # The request hangs (within the tool's 2 s timeout) long enough to kill the worker.
    shop.fault(path, latency_ms=1500)
    env = {**FAST_SWEEP, "TOOLOPS_CLAIM_LEASE_S": "2"}
    first = worker(**env)
    wait_for(lambda: bool(shop.requests(path)), SETTLE_WITHIN_S, first)
    first.kill()
    shop.fault(path)
    running = Compensation.objects.get(status=Compensation.Status.RUNNING)
    assert running.undo_call is None  # it died before recording anything
    assert run_status() == Run.Status.ABORTING
    return worker(**env)


def test_it_finishes_an_undo_once_when_the_worker_dies_mid_request(
    worker: StartWorker, api: APIClient, shop: Shop, lost_messages: MagicMock
) -> None:
    calls = buy(api)
    charge_id = calls["charge"]["result"]["charge_id"]
    abort(api)
    second = crash_mid_request(worker, shop, REFUND)
    wait_for(ended(), SETTLE_WITHIN_S, second)

    assert run_status() == Run.Status.ABORTED
    refund = Compensation.objects.get(tool="refund")
    assert refund.status == Compensation.Status.SUCCEEDED
    assert refund.rounds == 1
    state = shop.state()
    assert [r["charge_id"] for r in state["refunds"]] == [charge_id]
    assert [c["status"] for c in state["charges"]] == ["refunded"]
    # The dead worker's request, then the survivor's re-send of the same undo (no answer
    # came back, and a refund is safe to repeat), under the same key.
    refunds = shop.requests(REFUND)
    assert len(refunds) == 2
    assert {r["headers"]["idempotency-key"] for r in refunds} == {refund.key}
    assert [r["path"] for r in undo_requests(shop)] == [REFUND, REFUND, CANCEL, RELEASE]
    assert {s for _, s in statuses(get_run(api))} == {"succeeded"}


def test_it_resumes_the_last_undo_a_dead_worker_held(
    worker: StartWorker, api: APIClient, shop: Shop, lost_messages: MagicMock
) -> None:
    # Nothing older is queued to wake the run again: only the lapsed claim of the undo the
    # dead worker held tells the sweep that it stalled.
    start_run(api)
    call_ok(api, step_index=1, tool="reserve_stock", args=STOCK)
    stock = shop.state()["stock"]["A12"]
    abort(api)
    second = crash_mid_request(worker, shop, RELEASE)
    wait_for(ended(), SETTLE_WITHIN_S, second)

    assert run_status() == Run.Status.ABORTED
    release = Compensation.objects.get()
    assert release.status == Compensation.Status.SUCCEEDED
    assert release.rounds == 1
    state = shop.state()
    assert [r["status"] for r in state["reservations"]] == ["released"]
    assert state["stock"]["A12"] == stock + STOCK["qty"]  # returned once
    releases = shop.requests(RELEASE)
    assert len(releases) == 2
    assert {r["headers"]["idempotency-key"] for r in releases} == {release.key}


def test_the_sweep_runs_an_abort_whose_message_was_lost(
    worker: StartWorker, api: APIClient, shop: Shop, lost_messages: MagicMock
) -> None:
    buy(api)
    abort(api)
    run_pk = Run.objects.get(run_id="r-1").pk
    lost_messages.assert_called_once_with(run_pk)  # sent, and lost

    w = worker(**FAST_SWEEP)
    wait_for(ended(), SETTLE_WITHIN_S, w)

    run = get_run(api)
    assert run["status"] == "aborted"
    assert {s for _, s in statuses(run)} == {"succeeded"}
    assert [r["path"] for r in undo_requests(shop)] == [REFUND, CANCEL, RELEASE]


def test_a_failing_refund_is_dead_lettered_then_retried_by_support(
    worker: StartWorker, api: APIClient, shop: Shop, lost_messages: MagicMock, support: Any
) -> None:
    calls = buy(api)
    charge_id = calls["charge"]["result"]["charge_id"]
    shop.fault(REFUND, fail_next=10_000, fail_status=503)
    abort(api)
    w = worker(**FAST_SWEEP)
    wait_for(ended(), SETTLE_WITHIN_S, w)

    assert run_status() == Run.Status.COMPENSATION_FAILED
    refund = Compensation.objects.select_related("undo_call").get(tool="refund")
    assert refund.status == Compensation.Status.DEAD_LETTERED
    assert refund.undo_call is not None
    assert refund.undo_call.status == ToolCall.Status.FAILED
    # refund declares max_attempts = 3; waits grow from 1 s: 1–2 s, then 2–4 s.
    attempts = list(Attempt.objects.filter(call=refund.undo_call).order_by("number"))
    assert [(a.number, a.http_status) for a in attempts] == [(1, 503), (2, 503), (3, 503)]
    waits = [a.waited_ms for a in attempts]
    assert waits[0] == 0
    assert all(a < b for a, b in zip(waits, waits[1:], strict=False)), waits
    for retry, waited in enumerate(waits[1:], start=1):
        low = 1000.0 * 2 ** (retry - 1)
        assert low <= waited <= 2 * low, waits
    assert len(shop.requests(REFUND)) == 3
    ticket = Ticket.objects.get(compensation=refund)
    assert ticket.status == Ticket.Status.OPEN
    assert ticket.reason == Ticket.Reason.DEAD_LETTERED
    opened = TicketEvent.objects.get(ticket=ticket, kind=TicketEvent.Kind.OPENED)
    # In words, naming the service: never "HTTP 503: injected_fault" as stored.
    assert opened.text == (
        "refund still failing after 3 attempts: the payments service answered 503 (unavailable)"
    ), opened.text
    # A dead letter does not stop the older undos.
    assert statuses(get_run(api)) == [
        ("release_stock", "succeeded"),
        ("cancel_order", "succeeded"),
        ("refund", "dead_lettered"),
    ]
    assert shop.state()["refunds"] == []

    shop.fault(REFUND)  # healed
    response = logged_in(support).post(f"/console/tickets/{ticket.pk}/retry/")
    assert response.status_code == 302, response.content
    assert TicketEvent.objects.filter(
        ticket=ticket, kind=TicketEvent.Kind.RETRIED, actor=support
    ).exists()
    assert run_status() in (Run.Status.ABORTING, Run.Status.ABORTED)
    wait_for(ended(), SETTLE_WITHIN_S, w)

    assert run_status() == Run.Status.ABORTED
    refund.refresh_from_db()
    assert refund.status == Compensation.Status.SUCCEEDED
    assert refund.rounds == 2
    ticket.refresh_from_db()
    assert ticket.status == Ticket.Status.CLOSED
    assert TicketEvent.objects.filter(ticket=ticket, kind=TicketEvent.Kind.SUCCEEDED).exists()
    assert [r["charge_id"] for r in shop.state()["refunds"]] == [charge_id]
    # The second round re-sent the same undo, under the same key.
    refunds = shop.requests(REFUND)
    assert [r["status"] for r in refunds] == [503, 503, 503, 200]
    assert {r["headers"]["idempotency-key"] for r in refunds} == {refund.key}
    # The older undos were not run again.
    assert len(shop.requests(CANCEL)) == len(shop.requests(RELEASE)) == 1
