"""The periodic sweep (`sweep_stale_claims`) settles claims whose holder died between
claim and record — with no request coming back for them. Like a duplicate request that
finds the lease expired, it never re-sends an unsafe write blindly: it asks the query
tool, or leaves the outcome unknown for a person. A live holder's claim is left alone."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.db.models.functions import Now
from django.utils import timezone
from rest_framework.test import APIClient

from tests.conftest import Shop
from tests.waiting import wait_until
from toolops.executor.settle import stale_claim_keys
from toolops.models import Attempt, IdempotencyRecord, Run, ToolCall
from toolops.tasks import sweep_stale_claims

from .helpers import allow_without_approval, charge_noquery, start_run
from .test_stale_claim import Agent

CHARGE_ARGS = {"order_id": "ord-41", "amount": "59.00"}


def kill_mid_charge(toolops_server: Any, agent_a: Any, shop: Shop, tool: str) -> ToolCall:
    """A ToolOps process claims a charge and sends it; the shop commits the charge and
    holds the answer back; the process is SIGKILLed. Returns the call it left behind."""
    server = toolops_server(TOOLOPS_CLAIM_LEASE_S="1")
    agent = Agent(agent_a[1])
    agent.create_run(server.url, "r-swept")
    shop.fault("/payments/charges", hang_after_commit_s=8)

    agent.call_in_background(
        server.url, "r-swept", {"step_index": 4, "tool": tool, "args": CHARGE_ARGS}
    )
    # The shop has committed the charge, and holds the answer back.
    wait_until(lambda: shop.state()["counts"]["charges"] == 1)
    assert len(shop.requests("/payments/charges")) == 1
    server.kill()
    shop.fault("/payments/charges")  # a re-sent charge would now be answered at once

    record = IdempotencyRecord.objects.get()
    assert record.state == "claimed"
    assert record.fence == 1
    call = ToolCall.objects.get()
    assert call.status == "in_progress"
    assert record.call_ref == call.call_id
    return call


def test_it_settles_a_killed_holders_charge_with_get_charge_without_charging_again(
    toolops_server: Any, agent_a: Any, shop: Shop
) -> None:
    allow_without_approval("charge")
    call = kill_mid_charge(toolops_server, agent_a, shop, "charge")
    [charge] = shop.state()["charges"]

    # The lease (max(1 s, timeout_s + 1) = 3 s from the claim) has not run out yet.
    assert IdempotencyRecord.objects.filter(lease_until__gt=Now()).exists()
    assert sweep_stale_claims() == 0
    assert IdempotencyRecord.objects.get().state == "claimed"
    assert ToolCall.objects.get().status == "in_progress"
    assert shop.requests("/payments/charges/lookup") == []

    wait_until(lambda: IdempotencyRecord.objects.filter(lease_until__lt=Now()).exists())
    assert sweep_stale_claims() == 1

    call.refresh_from_db()
    assert call.status == "succeeded"
    assert call.result["charge_id"] == charge["charge_id"]
    assert call.error_class == ""
    assert call.finished_at is not None
    assert "get_charge" in call.feedback
    record = IdempotencyRecord.objects.get()
    assert record.state == "recorded"
    assert record.fence == 2
    # Asked by order_id; the charge was not sent a second time.
    lookups = shop.requests("/payments/charges/lookup")
    assert [(r["body"]["order_id"], r["status"]) for r in lookups] == [("ord-41", 200)]
    assert len(shop.requests("/payments/charges")) == 1
    assert shop.state()["counts"]["charges"] == 1
    assert Attempt.objects.filter(call=call, purpose="reconcile").count() == 1

    # Delivered twice: nothing is left to sweep, nothing more is sent.
    assert sweep_stale_claims() == 0
    assert len(shop.requests("/payments/charges/lookup")) == 1
    assert len(shop.requests("/payments/charges")) == 1


def test_it_leaves_a_killed_holders_charge_unknown_when_there_is_no_query_tool(
    toolops_server: Any, agent_a: Any, shop: Shop, catalog: Any
) -> None:
    catalog(charge_noquery())
    call = kill_mid_charge(toolops_server, agent_a, shop, "charge_noquery")
    wait_until(lambda: IdempotencyRecord.objects.filter(lease_until__lt=Now()).exists())

    assert sweep_stale_claims() == 1

    call.refresh_from_db()
    assert call.status == "unknown"
    assert call.error_class == "unknown"
    assert call.result is None
    assert "do not retry" in call.feedback.lower()
    assert "a person will check it" in call.feedback
    # Nobody can ask about it: no look is scheduled; it waits for a person.
    assert call.next_reconcile_at is None
    assert IdempotencyRecord.objects.get().state == "recorded"
    assert len(shop.requests("/payments/charges")) == 1
    assert shop.state()["counts"]["charges"] == 1
    assert shop.requests("/payments/charges/lookup") == []
    assert sweep_stale_claims() == 0
    assert len(shop.requests("/payments/charges")) == 1


def left_behind(api: APIClient, *, lease_in: timedelta) -> tuple[ToolCall, IdempotencyRecord]:
    """An in-progress charge and its claim, as a holder leaves them mid-request."""
    start_run(api)
    run = Run.objects.get(run_id="r-1")
    call = ToolCall.objects.create(
        call_id="c-left",
        run=run,
        tool_call_id="tc-left",
        step_index=4,
        tool="charge",
        args=CHARGE_ARGS,
        args_digest="d",
        idempotency_key="k" * 64,
        client_reference="tops-" + "k" * 32,
        status="in_progress",
    )
    record = IdempotencyRecord.objects.create(
        key=call.idempotency_key,
        call_ref=call.call_id,
        tool="charge",
        state="claimed",
        fence=1,
        lease_until=timezone.now() + lease_in,
        expires_at=timezone.now() + timedelta(days=7),
    )
    return call, record


def test_it_leaves_a_claim_alone_while_its_lease_runs(api: APIClient, shop: Shop) -> None:
    allow_without_approval("charge")
    call, record = left_behind(api, lease_in=timedelta(seconds=30))

    assert stale_claim_keys() == []
    assert sweep_stale_claims() == 0

    record.refresh_from_db()
    assert (record.state, record.fence) == ("claimed", 1)
    call.refresh_from_db()
    assert call.status == "in_progress"
    assert shop.requests() == []


def test_it_sends_a_dead_holders_charge_once_when_get_charge_finds_none(
    api: APIClient, shop: Shop
) -> None:
    # The holder died before its request left: the query proves nothing was charged, so
    # the sweep sends it — once, with the call's own client reference.
    allow_without_approval("charge")
    call, record = left_behind(api, lease_in=timedelta(seconds=-1))

    assert stale_claim_keys() == [record.key]
    assert sweep_stale_claims() == 1

    call.refresh_from_db()
    assert call.status == "succeeded"
    [charge] = shop.state()["charges"]
    assert call.result["charge_id"] == charge["charge_id"]
    [lookup] = shop.requests("/payments/charges/lookup")
    [sent] = shop.requests("/payments/charges")
    assert lookup["status"] == 404
    assert lookup["at"] < sent["at"]
    assert sent["body"]["client_reference"] == call.client_reference
    assert sent["headers"]["idempotency-key"] == call.idempotency_key
    record.refresh_from_db()
    assert (record.state, record.fence) == ("recorded", 2)
    assert sweep_stale_claims() == 0
    assert len(shop.requests("/payments/charges")) == 1
