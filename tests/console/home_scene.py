"""What the home's tests put in front of a person: one thing of each kind that needs
attention, built as the code that makes them leaves them."""

from __future__ import annotations

from datetime import timedelta
from types import SimpleNamespace
from typing import Any

from django.utils import timezone

from tests.compensations.conftest import dead_letter
from tests.toolops.approvals.test_console import hold
from toolops.models import CircuitBreaker, NotificationDelivery, NotificationEvent

from .conftest import make_call, make_run

BREAKER_WHY = "5 failures in a row"
NOTIFY_ERROR = "The webhook at chat.example answered 500 Internal Server Error."


def open_breaker(tool: str = "flaky_warehouse", *, minutes_ago: int = 3) -> CircuitBreaker:
    now = timezone.now()
    return CircuitBreaker.objects.create(
        tool=tool,
        state=CircuitBreaker.State.OPEN,
        consecutive_failures=5,
        opened_at=now - timedelta(minutes=minutes_ago),
        open_until=now + timedelta(minutes=4),
        reason=BREAKER_WHY,
    )


def failed_notification(key: str = "breaker_opened:flaky_warehouse:1") -> NotificationDelivery:
    event = NotificationEvent.objects.create(
        key=key,
        kind="breaker_opened",
        ref="flaky_warehouse",
        fanned_out_at=timezone.now(),
        subject="Tool switched off: flaky_warehouse",
        link="http://localhost/console/health/",
    )
    return NotificationDelivery.objects.create(
        event=event,
        channel="webhook",
        target="operators",
        status="failed",
        attempts=6,
        last_error=NOTIFY_ERROR,
    )


def unknown_call(agent: Any, run_id: str = "r-unknown") -> Any:
    run = make_run(agent, run_id)
    return make_call(
        run,
        "tc-charge-1",
        0,
        "send_notification",
        "unknown",
        created_at=timezone.now() - timedelta(minutes=7),
    )


def everything(agent: Any) -> SimpleNamespace:
    """One of each: an open breaker, an open ticket, an approval waiting 15 min, an unknown
    outcome and a failed notification."""
    return SimpleNamespace(
        breaker=open_breaker(),
        ticket=dead_letter(agent, "r-undo"),
        approval=hold(make_run(agent, "r-held"), "tc-held-1", age_s=15 * 60),
        unknown=unknown_call(agent),
        delivery=failed_notification(),
    )
