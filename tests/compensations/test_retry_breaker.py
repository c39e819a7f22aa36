"""A support Retry against an open breaker (issue: "A support Retry against an open breaker
dead-letters again at once"). A refund fails until its breaker opens; the payments
service heals; support presses Retry within the cool-down. The round must wait for the
breaker — the ticket says when it runs — and then refund once, with a real worker over
real HTTP."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any
from unittest.mock import MagicMock

import pytest
from django.utils import timezone

from compensations.models import Compensation, Ticket, TicketEvent
from compensations.services import breaker_wait, runs_needing_work
from tests.compensations.conftest import dead_letter
from tests.compensations.test_saga_worker import (
    FAST_SWEEP,
    REFUND,
    SETTLE_WITHIN_S,
    abort,
    buy,
    ended,
    run_status,
)
from tests.conftest import Shop, write_catalog
from tests.console.conftest import logged_in
from tests.worker import Worker, wait_for
from toolops.models import Agent, Attempt, CircuitBreaker, Run
from toolops.tools import registry

COOLDOWN_S = 8


@pytest.fixture
def refund_breaker(shop: Shop, settings: Any) -> Iterator[None]:
    """The refund tool's breaker opens on its third failure in a row (one round of its
    three attempts) and cools down for COOLDOWN_S."""
    catalog = write_catalog(shop.url)
    text = catalog.read_text()
    marker = 'summary = "Refund charge {charge_id}"'
    assert marker in text
    breaker = (
        f"breaker = {{ consecutive_failures = 3, min_calls = 100, cooldown_s = {COOLDOWN_S} }}"
    )
    catalog.write_text(text.replace(marker, f"{breaker}\n{marker}"))
    settings.TOOLOPS_TOOLS_FILE = str(catalog)
    registry.reset()
    yield
    catalog.unlink(missing_ok=True)


def test_a_retry_pressed_while_the_breaker_is_open_waits_for_it_then_refunds_once(
    worker: Callable[..., Worker],
    api: Any,
    shop: Shop,
    refund_breaker: None,
    lost_messages: MagicMock,
    support: Any,
) -> None:
    calls = buy(api)
    shop.fault(REFUND, fail_next=10_000, fail_status=503)
    abort(api)
    w = worker(**FAST_SWEEP)
    wait_for(ended(), SETTLE_WITHIN_S, w)
    assert run_status() == Run.Status.COMPENSATION_FAILED
    breaker = CircuitBreaker.objects.get(tool="refund")
    assert breaker.state == CircuitBreaker.State.OPEN
    assert breaker.open_until is not None and breaker.open_until > timezone.now()
    refund = Compensation.objects.get(tool="refund")
    ticket = Ticket.objects.get(compensation=refund)

    shop.fault(REFUND)  # the payments service is healthy again; the breaker is still open
    client = logged_in(support)
    response = client.post(f"/console/tickets/{ticket.pk}/retry/", follow=True)

    page = response.content.decode()
    at = f"{breaker.open_until:%H:%M:%S}"
    # Told when it will run — on the message, the thread and the page — not dead-lettered.
    assert f"the worker runs refund at {at} UTC, when it lets a call through" in page
    assert "Waits for the breaker: runs at" in page
    retried = TicketEvent.objects.get(ticket=ticket, kind=TicketEvent.Kind.RETRIED)
    assert retried.text == f"waits for the refund breaker: runs at {at} UTC"
    refund.refresh_from_db()
    assert refund.status == Compensation.Status.PENDING
    assert refund.not_before == breaker.open_until

    wait_for(ended(), COOLDOWN_S + SETTLE_WITHIN_S, w)

    assert run_status() == Run.Status.ABORTED
    refund.refresh_from_db()
    assert refund.status == Compensation.Status.SUCCEEDED
    assert refund.rounds == 2
    ticket.refresh_from_db()
    assert ticket.status == Ticket.Status.CLOSED
    # Nothing was sent into the open breaker: three failures, then one refund after it.
    refunds = shop.requests(REFUND)
    assert [r["status"] for r in refunds] == [503, 503, 503, 200]
    charge_id = calls["charge"]["result"]["charge_id"]
    assert [r["charge_id"] for r in shop.state()["refunds"]] == [charge_id]
    second = Attempt.objects.get(call=refund.undo_call)
    assert second.http_status == 200
    assert second.started_at >= breaker.open_until
    assert CircuitBreaker.objects.get(tool="refund").state == CircuitBreaker.State.CLOSED


def test_an_undo_waits_for_its_breaker_only_while_it_refuses_and_not_forever(
    db: None, settings: Any
) -> None:
    settings.TOOLOPS_COMPENSATION_BREAKER_WAIT_S = 900
    now = timezone.now()
    assert breaker_wait(tool="refund", queued_at=now) is None  # never tripped
    until = now + timedelta(seconds=60)
    CircuitBreaker.objects.create(tool="refund", state="open", open_until=until)
    assert breaker_wait(tool="refund", queued_at=now) == until
    # Queued longer ago than the wait allows: sent anyway, and a refusal says why.
    assert breaker_wait(tool="refund", queued_at=now - timedelta(seconds=901)) is None
    # Past its cool-down the next call is the probe: no wait.
    CircuitBreaker.objects.filter(tool="refund").update(open_until=now - timedelta(seconds=1))
    assert breaker_wait(tool="refund", queued_at=now) is None
    # Another call's probe under way: wait for its outcome.
    probe = now + timedelta(seconds=5)
    CircuitBreaker.objects.filter(tool="refund").update(state="half_open", probe_until=probe)
    assert breaker_wait(tool="refund", queued_at=now) == probe


def test_the_sweep_leaves_a_round_waiting_for_its_breaker_until_it_is_due(
    agent_a: tuple[Agent, str], settings: Any
) -> None:
    ticket = dead_letter(agent_a[0])
    long_ago = timezone.now() - timedelta(minutes=5)
    waiting = Compensation.objects.filter(pk=ticket.compensation_id)
    waiting.update(
        status=Compensation.Status.PENDING,
        queued_at=long_ago,
        not_before=timezone.now() + timedelta(minutes=1),
    )
    Run.objects.filter(pk=ticket.run_id).update(status=Run.Status.ABORTING)

    assert ticket.run_id not in runs_needing_work(grace_s=1)

    waiting.update(not_before=timezone.now() - timedelta(seconds=1))
    assert runs_needing_work(grace_s=1) == [ticket.run_id]
