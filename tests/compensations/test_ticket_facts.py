"""A ticket's page in the customer's words: titled by what was not put back (never "undo
refund"), the amount in sight, whether the undo's service answers now (so whether Retry can
work), and a closed ticket that reads as closed."""

# ruff: noqa: F811

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from compensations.desk import ticket_resolve
from compensations.models import Ticket
from tests.console.conftest import (  # noqa: F401 - fixtures shared with the console tests
    fast_password_hashing,
    logged_in,
    make_attempt,
    support,
)
from tests.console.facts_catalog import CHARGE, facts_catalog  # noqa: F401
from toolops.models import Agent, Attempt, CircuitBreaker
from toolops.templatetags.when import clock

from .conftest import dead_letter

pytestmark = pytest.mark.django_db

TECHNICAL = '<details class="card technical"'
HISTORY = '<details class="card history"'


def _words(html: str) -> str:
    """What a person reads of `html`: its text, without tags, attributes or tooltips."""
    return re.sub(r"<[^>]+>", " ", html)


@pytest.fixture
def refund_ticket(agent_a: tuple[Agent, str], facts_catalog: Any) -> Ticket:
    """A cancelled run whose charge's refund failed every attempt with a 503."""
    ticket = dead_letter(
        agent_a[0],
        "r-refund",
        tool="refund",
        args={"charge_id": "ch_1"},
        error="HTTP 503: injected_fault",
    )
    charge = ticket.compensation.call
    charge.tool, charge.args, charge.result = "charge", CHARGE, {"charge_id": "ch_1"}
    charge.save(update_fields=["tool", "args", "result"])
    return ticket


def _page(user: Any, ticket: Ticket) -> str:
    return logged_in(user).get(f"/console/tickets/{ticket.pk}/").content.decode()


def test_an_open_ticket_says_what_the_customer_lives_with(
    support: Any, refund_ticket: Ticket
) -> None:
    page = _page(support, refund_ticket)

    assert (
        "Refund not made: charge 89.00 EUR to customer cus_42 for order ord_1 (cancelled run)"
    ) in page
    assert "undo refund" not in page.lower()
    shown = page[: page.index(TECHNICAL)]
    assert "<dt>Amount</dt><dd>89.00</dd>" in shown and "<dt>Currency</dt><dd>EUR</dd>" in shown
    assert "Last try: the payments service answered 503 (unavailable)." in shown
    assert ">needs a person<" in shown and "dead_lettered<" not in shown
    for jargon in ("compensation", "idempotency", "rounds", "trace_id", "dead_letter"):
        assert jargon not in _words(shown.split("<main", 1)[1]).lower(), jargon
    # API.md: the run_id, the undo tool's name, Retry and Resolve.
    assert "<code>r-refund</code>" in page and "<code>refund</code>" in page
    assert '<button type="submit">Retry</button>' in page
    assert '<button type="submit">Resolve</button>' in page
    assert "Assign to me" in page


def test_it_says_retry_should_work_once_the_service_answers_again(
    support: Any, refund_ticket: Ticket
) -> None:
    undo = refund_ticket.compensation.undo_call
    Attempt.objects.filter(call=undo).update(health=Attempt.Health.FAILURE)
    make_attempt(
        undo,
        9,
        tool="refund",
        health=Attempt.Health.SUCCESS,
        started_at=timezone.now() + timedelta(seconds=1),
    )

    page = _page(support, refund_ticket)

    assert "The payments service is answering again: Retry should work." in page
    assert '<dd class="breaker-state">closed</dd>' in page


def test_it_says_a_retry_waits_while_the_breaker_is_open(
    support: Any, refund_ticket: Ticket
) -> None:
    until = timezone.now() + timedelta(minutes=5)
    CircuitBreaker.objects.create(tool="refund", state="open", open_until=until)

    page = _page(support, refund_ticket)
    # As of the page's own now: five minutes before midnight, "until" is tomorrow's.
    read_at = timezone.now()

    # When, in the reader's words and absolute (compensations/times.py).
    assert (
        f"The payments service is failing: breaker open until {clock(until, read_at)} (in 4 min); "
        "a Retry waits until then."
    ) in page
    # The breaker in the words of every other page (toolops/breaker_state.py).
    assert f'<dd class="breaker-state">open — cooling down until {until:%H:%M} UTC</dd>' in page


def test_an_open_breaker_past_its_cooldown_lets_retry_through(
    support: Any, refund_ticket: Ticket
) -> None:
    CircuitBreaker.objects.create(
        tool="refund", state="open", open_until=timezone.now() - timedelta(seconds=1)
    )

    page = _page(support, refund_ticket)

    assert "Retry will fail" not in page
    assert '<dd class="breaker-state">half-open — the next call is a probe</dd>' in page


def test_a_closed_ticket_reads_as_closed(support: Any, refund_ticket: Ticket) -> None:
    ticket_resolve(ticket=refund_ticket, by=support, note="Refunded in the payments dashboard.")

    page = _page(support, refund_ticket)

    assert "Refund fixed by hand: charge 89.00 EUR to customer cus_42" in page
    assert "Closed by <strong>sam</strong>" in page
    assert 'fixed by hand: <span class="closing-note">Refunded in the payments dashboard.' in page
    shown = page[: page.index(HISTORY)]
    assert "Assign to me" not in page and ">Retry</button>" not in page
    assert ">Resolve</button>" not in page
    assert "err-message" not in shown and "503" not in shown
    # The last error is kept, folded with the history and the technical details.
    assert f'{HISTORY} id="ticket-history-{refund_ticket.pk}">' in page  # folded: not open
    assert "HTTP 503: injected_fault" in page[page.index(TECHNICAL) :]


def test_the_desk_counts_and_ages_only_open_tickets(
    support: Any, agent_a: tuple[Agent, str], refund_ticket: Ticket
) -> None:
    still_open = dead_letter(agent_a[0], "r-open")
    ticket_resolve(ticket=refund_ticket, by=support, note="Refunded by hand.")

    page = logged_in(support).get("/console/tickets/?status=all").content.decode()

    assert 'class="badge count-open">1<' in page
    closed_row = page[page.index(f'id="ticket-{refund_ticket.pk}"') :]
    closed_row = closed_row[: closed_row.index("</tr>")]
    # When it closed, not a wait that keeps growing.
    assert '<span class="muted">closed <time' in closed_row
    assert f'title="opened {refund_ticket.opened_at:%Y-%m-%d %H:%M:%S} UTC"' not in closed_row
    assert "err-message" not in closed_row
    open_row = page[page.index(f'id="ticket-{still_open.pk}"') :]
    open_row = open_row[: open_row.index("</tr>")]
    assert "<time" in open_row and ">needs a person<" in open_row
    assert "Refund fixed by hand: charge 89.00 EUR" in page
