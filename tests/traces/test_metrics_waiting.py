"""`/metrics`: how long things have waited for a person — the oldest open ticket, the
oldest pending approval and those about to expire, each tool's oldest unknown outcome —
the figures an operator's alert needs beside the counts (deploy/prometheus/)."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from compensations.models import Compensation, Ticket
from tests.traces.conftest import Catalog
from tests.traces.test_metrics import make_call, make_run, scraped
from toolops.models import Agent, Approval, ToolCall
from toolops.notify.watch import EXPIRING_MAX
from traces.metrics import APPROVAL_EXPIRING

pytestmark = pytest.mark.django_db

# The rows are stamped by this process's clock, the ages read on the database's: the
# same machine's clock, a test's few statements apart.
CLOCKS = 5.0


def open_ticket(agent: Agent, *, opened_ago: timedelta, status: str = "open") -> Ticket:
    run = make_run(agent, run_id=f"r-{uuid.uuid4().hex[:8]}")
    call = make_call(run, "reserve_stock", "succeeded")
    compensation = Compensation.objects.create(
        run=run, call=call, tool="release_stock", key=uuid.uuid4().hex, status="dead_lettered"
    )
    return Ticket.objects.create(
        compensation=compensation,
        run=run,
        tool="release_stock",
        status=status,
        reason=Ticket.Reason.DEAD_LETTERED,
        opened_at=timezone.now() - opened_ago,
    )


def test_it_reports_the_oldest_open_tickets_age(agent_a: tuple[Agent, str]) -> None:
    open_ticket(agent_a[0], opened_ago=timedelta(hours=2))
    open_ticket(agent_a[0], opened_ago=timedelta(minutes=10))
    # Closed: nobody waits on it, however old.
    open_ticket(agent_a[0], opened_ago=timedelta(hours=9), status="closed")

    found = scraped()

    assert found[("toolops_dead_letters_open", ())] == 2
    age = found[("toolops_dead_letters_oldest_age_seconds", ())]
    assert age == pytest.approx(2 * 3600, abs=CLOCKS)


def test_it_reports_zero_ages_and_counts_when_nothing_waits(db: None) -> None:
    found = scraped()

    assert found[("toolops_dead_letters_oldest_age_seconds", ())] == 0
    assert found[("toolops_approvals_oldest_age_seconds", ())] == 0
    assert found[("toolops_approvals_expiring", ())] == 0


def approval(agent: Agent, *, created_ago: timedelta, expires_in: timedelta, **fields: Any) -> None:
    now = timezone.now()
    Approval.objects.create(
        run=make_run(agent, run_id=f"r-{uuid.uuid4().hex[:8]}"),
        tool="charge",
        reason="irreversible",
        args_hash="x",
        created_at=now - created_ago,
        expires_at=now + expires_in,
        **fields,
    )


def test_it_reports_the_oldest_pending_approval_and_those_about_to_expire(
    agent_a: tuple[Agent, str],
) -> None:
    agent = agent_a[0]
    minutes = timedelta(minutes=1)
    approval(agent, created_ago=27 * minutes, expires_in=3 * minutes)  # about to expire
    approval(agent, created_ago=1 * minutes, expires_in=29 * minutes)  # time left
    approval(agent, created_ago=1 * minutes, expires_in=4 * minutes)  # about to expire
    # Ended ones wait for nobody, however old or near their expiry they were.
    approval(
        agent,
        created_ago=90 * minutes,
        expires_in=2 * minutes,
        status="approved",
        decided_at=timezone.now(),
    )
    approval(
        agent,
        created_ago=90 * minutes,
        expires_in=-minutes,
        status="expired",
        decided_at=timezone.now(),
    )

    found = scraped()

    assert found[("toolops_approvals_pending", ())] == 3
    assert found[("toolops_approvals_expiring", ())] == 2
    age = found[("toolops_approvals_oldest_age_seconds", ())]
    assert age == pytest.approx(27 * 60, abs=CLOCKS)


def test_an_approval_past_its_time_counts_until_the_worker_ends_it(
    agent_a: tuple[Agent, str],
) -> None:
    """Past its expiry and still pending (the worker ends it within a minute): still
    expiring, as the console's home counts it, and still the oldest."""
    approval(agent_a[0], created_ago=timedelta(minutes=31), expires_in=-timedelta(minutes=1))
    approval(agent_a[0], created_ago=timedelta(minutes=1), expires_in=timedelta(minutes=6))

    found = scraped()

    assert found[("toolops_approvals_expiring", ())] == 1
    age = found[("toolops_approvals_oldest_age_seconds", ())]
    assert age == pytest.approx(31 * 60, abs=CLOCKS)


def test_the_expiring_horizon_is_the_notifications_one() -> None:
    assert APPROVAL_EXPIRING == EXPIRING_MAX


def test_it_reports_each_tools_oldest_unknown_outcome(
    agent_a: tuple[Agent, str], catalog: Catalog
) -> None:
    catalog()
    run = make_run(agent_a[0])
    now = timezone.now()
    make_call(run, "charge", "unknown", created_at=now - timedelta(minutes=40))
    make_call(run, "charge", "unknown", created_at=now - timedelta(minutes=5))
    # Settled: no longer unknown. An undo call: the compensations' business.
    make_call(run, "charge", "succeeded", created_at=now - timedelta(hours=3))
    make_call(
        run, "refund", "unknown", role=ToolCall.Role.UNDO, created_at=now - timedelta(hours=3)
    )

    found = scraped()

    assert found[("toolops_unknown_calls", (("tool", "charge"),))] == 2
    age = found[("toolops_unknown_calls_oldest_age_seconds", (("tool", "charge"),))]
    assert age == pytest.approx(40 * 60, abs=CLOCKS)
    # Every catalog tool has the series, 0 without an unknown outcome.
    assert found[("toolops_unknown_calls_oldest_age_seconds", (("tool", "refund"),))] == 0
