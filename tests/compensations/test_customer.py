"""The consequence for the customer in one sentence (compensations/customer.py), built from
the catalog and the run's calls, and the desk's times and errors in words
(compensations/times.py)."""

# ruff: noqa: F811

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from compensations.customer import customer_sentence, past
from compensations.models import Compensation, Ticket
from compensations.times import error_words, times_in_text
from tests.console.conftest import fast_password_hashing, logged_in, support  # noqa: F401
from toolops.models import Agent, Run
from toolops.templatetags.when import at_words
from toolops.tools import registry

from .desk_catalog import desk_catalog, refund_dead_lettered, undo_round  # noqa: F401

pytestmark = pytest.mark.django_db
NOW = datetime(2026, 12, 7, 6, 26, 4, tzinfo=UTC)


def test_it_says_what_the_customer_faces_before_the_refund(
    agent_a: tuple[Agent, str], desk_catalog: Any
) -> None:
    ticket = refund_dead_lettered(agent_a[0])

    # The charge first, the refund last; the reservation and the order where they are now;
    # the stock query left out.
    assert customer_sentence(ticket=ticket) == (
        "The customer was charged 89.00 EUR (ch_1); the reservation res_1 was released; "
        "the order ord_1 was cancelled; the refund has not been made."
    )


def test_it_says_refunded_with_the_date_and_the_refund_once_made(
    agent_a: tuple[Agent, str], desk_catalog: Any
) -> None:
    ticket = refund_dead_lettered(agent_a[0])
    refund = ticket.compensation
    undo_round(refund, ok=True, result={"refund_id": "re_9", "charge_id": "ch_1"})

    ticket.refresh_from_db()
    refund.refresh_from_db()
    made = refund.finished_at.astimezone(UTC)
    assert ticket.status == Ticket.Status.CLOSED
    assert customer_sentence(ticket=ticket) == (
        "The customer was charged 89.00 EUR (ch_1); the reservation res_1 was released; "
        f"the order ord_1 was cancelled; refunded on {made.day} {made:%b %Y} at "
        f"{made:%H:%M} UTC (refund re_9)."
    )


def test_a_ticket_for_an_order_ends_with_where_the_order_is(
    agent_a: tuple[Agent, str], desk_catalog: Any
) -> None:
    ticket = refund_dead_lettered(agent_a[0])
    order = Compensation.objects.get(run=ticket.run, tool="cancel_order")
    Compensation.objects.filter(pk=order.pk).update(status=Compensation.Status.DEAD_LETTERED)
    Compensation.objects.filter(pk=ticket.compensation_id).update(
        status=Compensation.Status.PENDING
    )
    order_ticket = Ticket.objects.create(
        compensation=order, run=ticket.run, tool="cancel_order", reason="dead_lettered"
    )

    assert customer_sentence(ticket=order_ticket) == (
        "The reservation res_1 was released; the customer was charged 89.00 EUR (ch_1); "
        "the refund is being made; the order ord_1 was created and has not been cancelled."
    )


def test_a_completed_runs_writes_stand(agent_a: tuple[Agent, str], desk_catalog: Any) -> None:
    ticket = refund_dead_lettered(agent_a[0])
    Compensation.objects.filter(run=ticket.run).exclude(pk=ticket.compensation_id).update(
        status=Compensation.Status.DISCARDED
    )
    Compensation.objects.filter(pk=ticket.compensation_id).update(
        status=Compensation.Status.RESOLVED
    )
    Run.objects.filter(pk=ticket.run_id).update(status=Run.Status.COMPLETED)

    assert customer_sentence(ticket=ticket) == (
        "The customer was charged 89.00 EUR (ch_1); the reservation res_1 was reserved; "
        "the order ord_1 was created; the refund was made by hand."
    )


def test_without_a_catalog_entry_it_still_speaks_from_the_tool_names(
    agent_a: tuple[Agent, str], desk_catalog: Any, settings: Any, tmp_path: Any
) -> None:
    ticket = refund_dead_lettered(agent_a[0])
    empty = tmp_path / "empty.toml"
    empty.write_text("")
    settings.TOOLOPS_TOOLS_FILE = str(empty)
    registry.reset()

    said = customer_sentence(ticket=ticket)

    # No params_schema to say which field is money: the charge is named by its id.
    assert said.startswith("The charge ch_1 was made; ")
    assert said.endswith("; the refund has not been made.")


@pytest.mark.parametrize(
    ("verb", "said"),
    [
        ("charge", "charged"),
        ("cancel", "cancelled"),
        ("refund", "refunded"),
        ("send", "sent"),
        ("notify", "notified"),
        ("stop", "stopped"),
        ("open", "opened"),
        ("release", "released"),
        ("book", "booked"),
        ("install", "installed"),
    ],
)
def test_past_participles(verb: str, said: str) -> None:
    assert past(verb) == said


def test_times_read_in_words_and_absolute() -> None:
    assert at_words(NOW + timedelta(minutes=4), NOW) == "06:30 UTC (in 4 min)"
    assert at_words(NOW - timedelta(minutes=3), NOW) == "06:23 UTC (3 min ago)"
    assert at_words(NOW + timedelta(days=2), NOW) == "9 Dec 2026 06:26 UTC (in 2 days)"
    assert times_in_text("runs at 2026-12-07T06:30:04Z, then", NOW) == (
        "runs at 06:30 UTC (in 4 min), then"
    )


def test_errors_read_as_sentences_naming_the_service(desk_catalog: Any) -> None:
    spec = registry.get("refund")
    circuit = error_words(
        "circuit open until 2026-12-07T06:30:04Z", tool="refund", spec=spec, now=NOW
    )
    http = error_words("HTTP 503: injected_fault", tool="refund", spec=spec, now=NOW)

    assert circuit == (
        "not sent: the payments service kept failing and its circuit is open until "
        "06:30 UTC (in 4 min)"
    )
    assert http == "the payments service answered 503 (unavailable)"
    later = NOW + timedelta(minutes=10)
    assert "circuit was open until 06:30 UTC (6 min ago)" in error_words(
        "circuit open until 2026-12-07T06:30:04Z", tool="refund", spec=spec, now=later
    )


def test_the_ticket_page_shows_the_sentence_and_no_raw_error(
    support: Any, agent_a: tuple[Agent, str], desk_catalog: Any
) -> None:
    ticket = refund_dead_lettered(agent_a[0])
    until = datetime.now(UTC) + timedelta(minutes=5)
    stored = f"circuit open until {until.isoformat(timespec='seconds').replace('+00:00', 'Z')}"
    Compensation.objects.filter(pk=ticket.compensation_id).update(last_error=stored)

    page = logged_in(support).get(f"/console/tickets/{ticket.pk}/").content.decode()

    shown = page[: page.index('<details class="card technical"')]
    assert '<p class="customer-sentence">The customer was charged 89.00 EUR (ch_1);' in shown
    assert re.search(r"circuit is open until \d\d:\d\d UTC \(in [45] min\)\.</p>", shown)
    # The stored text: in the tooltip and under Technical details only.
    assert f'title="{stored}"' in shown
    assert stored not in re.sub(r'title="[^"]*"', "", shown)
    assert stored in page[page.index('<details class="card technical"') :]
