"""Crash points on the path of one call and in the stale-claim sweep (toolops/crash.py):
the process dies by SIGKILL at the point, and once ToolOps runs again — a web process
and a worker, without the crash — the call ends with one final status, its idempotency
record recorded and the downstream's effect made exactly once. Nothing is re-sent
blindly: the worker's stale-claim sweep asks get_charge before it charges."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.utils import timezone

from tests.conftest import Shop
from tests.toolops.executor.helpers import allow_without_approval
from tests.toolops.executor.test_stale_claim import Agent
from toolops.models import Attempt, IdempotencyRecord, Run, ToolCall

from .crashing import FAST, killed, record_of, settled, worker_killed_at

CHARGES, LOOKUPS = "/payments/charges", "/payments/charges/lookup"


def restart(toolops_server: Any, worker: Any, call: ToolCall) -> tuple[Any, ToolCall]:
    """Start a worker and a web process again, without the crash point; the restarted
    server, and the call once the worker's sweep has settled it."""
    restarted = worker(**FAST)  # it starts while the web process does
    server = toolops_server(**FAST)
    return server, settled(call.call_id, restarted)


def crash_mid_call(toolops_server: Any, agent_a: Any, point: str, args: dict[str, str]) -> Agent:
    """An agent's charge reaches a web process armed at `point`, which dies there."""
    allow_without_approval("charge")
    server = toolops_server(TOOLOPS_CRASH_AT=point, **FAST)
    agent = Agent(agent_a[1])
    agent.create_run(server.url, "r-crash")
    agent.call_in_background(
        server.url, "r-crash", {"step_index": 3, "tool": "charge", "args": args}
    )
    killed(server.proc)
    # A dead holder's leftovers: its claim, and the call in progress with no attempt kept.
    record = IdempotencyRecord.objects.get()
    assert (record.state, record.fence) == ("claimed", 1)
    call = ToolCall.objects.get()
    assert call.status == ToolCall.Status.IN_PROGRESS
    assert not Attempt.objects.exists()
    return agent


def test_after_claim_the_sweep_charges_once_after_get_charge_finds_nothing(
    toolops_server: Any, worker: Any, agent_a: Any, shop: Shop
) -> None:
    args = {"order_id": "ord-c1", "amount": "12.00"}
    agent = crash_mid_call(toolops_server, agent_a, "after-claim", args)
    assert shop.requests() == []  # it died before the first attempt went out
    call = ToolCall.objects.get()

    server, done = restart(toolops_server, worker, call)

    assert done.status == ToolCall.Status.SUCCEEDED
    [charge] = shop.state()["charges"]
    assert done.result["charge_id"] == charge["charge_id"]
    [lookup] = shop.requests(LOOKUPS)
    [sent] = shop.requests(CHARGES)
    assert (lookup["status"], sent["status"]) == (404, 200)
    assert lookup["at"] < sent["at"]  # asked first, then charged, once
    assert sent["headers"]["idempotency-key"] == call.idempotency_key
    assert (record_of(call).state, record_of(call).fence) == ("recorded", 2)
    # The agent, asking again on the restarted server, gets that one charge.
    again = agent.call(server.url, "r-crash", {"step_index": 3, "tool": "charge", "args": args})
    assert again.json()["call_id"] == call.call_id
    assert again.json()["status"] == "succeeded"
    assert len(shop.requests(CHARGES)) == 1


def test_after_answer_the_sweep_finds_the_charge_with_get_charge_and_never_resends_it(
    toolops_server: Any, worker: Any, agent_a: Any, shop: Shop
) -> None:
    args = {"order_id": "ord-a1", "amount": "34.00"}
    agent = crash_mid_call(toolops_server, agent_a, "after-answer", args)
    # The shop charged and answered; ToolOps died before it wrote a word of it.
    [sent] = shop.requests(CHARGES)
    assert sent["status"] == 200
    call = ToolCall.objects.get()

    server, done = restart(toolops_server, worker, call)

    assert done.status == ToolCall.Status.SUCCEEDED
    [charge] = shop.state()["charges"]
    assert done.result["charge_id"] == charge["charge_id"]
    assert "get_charge" in done.feedback
    assert len(shop.requests(CHARGES)) == 1
    assert [r["status"] for r in shop.requests(LOOKUPS)] == [200]
    assert (record_of(call).state, record_of(call).fence) == ("recorded", 2)
    # Its undo is registered with the result, as for any charge that was made.
    assert done.compensation.tool == "refund"
    again = agent.call(server.url, "r-crash", {"step_index": 3, "tool": "charge", "args": args})
    assert again.json()["call_id"] == call.call_id
    assert len(shop.requests(CHARGES)) == 1


def left_behind(agent_a: Any, order_ids: list[str]) -> list[ToolCall]:
    """Charges whose holder died between claim and record, their leases run out: what
    a killed web process leaves (test_after_claim above makes one for real)."""
    allow_without_approval("charge")
    run = Run.objects.create(run_id="r-swept", agent=agent_a[0])
    calls = []
    for step, order_id in enumerate(order_ids):
        key = f"{step}" * 64
        call = ToolCall.objects.create(
            call_id=f"c-left-{step}",
            run=run,
            tool_call_id=f"tc-left-{step}",
            step_index=step,
            tool="charge",
            args={"order_id": order_id, "amount": "5.00"},
            args_digest="d",
            idempotency_key=key,
            client_reference="tops-" + key[:32],
            status="in_progress",
        )
        IdempotencyRecord.objects.create(
            key=key,
            call_ref=call.call_id,
            tool="charge",
            state="claimed",
            fence=1,
            lease_until=timezone.now() - timedelta(seconds=1),
            expires_at=timezone.now() + timedelta(days=7),
        )
        calls.append(call)
    return calls


def test_mid_sweep_a_claim_taken_over_by_a_dead_sweep_is_taken_over_again(
    worker: Any, agent_a: Any, shop: Shop
) -> None:
    calls = left_behind(agent_a, ["ord-s1", "ord-s2"])

    worker_killed_at(worker(TOOLOPS_CRASH_AT="mid-sweep", **FAST), "mid-sweep")
    # It took one claim over (a new fence and lease), then died: nothing was asked or
    # sent, and the other claim was not reached.
    fences = sorted(IdempotencyRecord.objects.values_list("state", "fence"))
    assert fences == [("claimed", 1), ("claimed", 2)]
    assert shop.requests() == []

    restarted = worker(**FAST)
    done = [settled(call.call_id, restarted) for call in calls]

    assert [c.status for c in done] == [ToolCall.Status.SUCCEEDED] * 2
    charges = shop.state()["charges"]
    assert sorted(c["order_id"] for c in charges) == ["ord-s1", "ord-s2"]  # once each
    assert len(shop.requests(CHARGES)) == 2
    assert sorted(record_of(c).fence for c in done) == [2, 3]
    assert {record_of(c).state for c in done} == {"recorded"}
