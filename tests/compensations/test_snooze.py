"""Snoozing a ticket (compensations/snooze.py): it leaves the Open list until its time and
comes back by itself, judged when the list is read; each snooze is on the thread and in
the audit log; a time in the past or beyond 30 days is refused, saying which."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.utils import timezone

from compensations.desk import TicketActionRefused, ticket_resolve
from compensations.models import Ticket, TicketEvent
from compensations.services import compensation_finish
from compensations.snooze import snooze_choices, ticket_snooze, ticket_unsnooze
from tests.console.conftest import logged_in
from toolops.audit.models import AuditEntry
from toolops.models import Agent
from toolops.notify.models import NotificationEvent
from toolops.notify.watch import tickets_unassigned

from .conftest import dead_letter

pytestmark = pytest.mark.django_db


def shown(client: Any, query: str = "") -> set[str]:
    page = client.get(f"/console/tickets/?{query}").content.decode()
    return {r for r in ("r-a", "r-b") if f"<code>{r}</code>" in page}


def test_a_snoozed_ticket_leaves_the_open_list_and_comes_back_by_itself(
    support: Any, agent_a: tuple[Agent, str]
) -> None:
    a, _ = dead_letter(agent_a[0], "r-a"), dead_letter(agent_a[0], "r-b")
    client = logged_in(support)
    until = timezone.now() + timedelta(hours=1)

    ticket_snooze(ticket=a, by=support, until=until)

    assert shown(client) == {"r-b"}
    assert shown(client, "status=snoozed") == {"r-a"}
    assert shown(client, "status=all") == {"r-a", "r-b"}
    page = client.get("/console/tickets/").content.decode()
    assert 'class="badge count-open">1<' in page and 'class="badge count-snoozed">1<' in page
    # Its time passes: nothing runs, the list reads it as back.
    Ticket.objects.filter(pk=a.pk).update(snoozed_until=timezone.now() - timedelta(seconds=1))
    assert shown(client) == {"r-a", "r-b"}
    assert shown(client, "status=snoozed") == set()
    event = TicketEvent.objects.get(ticket=a, kind=TicketEvent.Kind.SNOOZED)
    assert event.actor == support
    assert event.text == f"until {until.day} {until:%b %Y} at {until:%H:%M} UTC"
    entry = AuditEntry.objects.get(action="ticket.snooze")
    assert (entry.actor_username, entry.object_id) == ("sam", str(a.pk))
    assert entry.detail == {"until": until.isoformat(timespec="seconds")}


def test_un_snooze_brings_it_back_now_audited(support: Any, ticket: Ticket) -> None:
    ticket_snooze(ticket=ticket, by=support, until=timezone.now() + timedelta(days=1))

    response = logged_in(support).post(f"/console/tickets/{ticket.pk}/unsnooze/", follow=True)

    assert "Back in the Open list." in response.content.decode()
    ticket.refresh_from_db()
    assert ticket.snoozed_until is None
    kinds = list(ticket.events.values_list("kind", flat=True))
    assert kinds == ["opened", "snoozed", "unsnoozed"]
    assert AuditEntry.objects.filter(action="ticket.snooze").count() == 2


def test_a_new_failure_ends_the_snooze(support: Any, ticket: Ticket) -> None:
    from compensations.desk import ticket_retry

    ticket_snooze(ticket=ticket, by=support, until=timezone.now() + timedelta(days=1))
    ticket_retry(ticket=ticket, by=support)
    compensation = ticket.compensation
    compensation.refresh_from_db()
    compensation.status = "running"
    compensation.save(update_fields=["status"])

    compensation_finish(compensation=compensation, undo=compensation.undo_call)

    ticket.refresh_from_db()
    assert ticket.status == "open" and ticket.snoozed_until is None


@pytest.mark.parametrize(
    ("delta", "problem"),
    [
        (timedelta(minutes=-5), "has already passed: choose a time to come."),
        (timedelta(days=31), "is more than 30 days away: snooze at most until"),
    ],
)
def test_it_refuses_a_time_past_or_too_far(
    support: Any, ticket: Ticket, delta: timedelta, problem: str
) -> None:
    with pytest.raises(TicketActionRefused, match=problem):
        ticket_snooze(ticket=ticket, by=support, until=timezone.now() + delta)

    ticket.refresh_from_db()
    assert ticket.snoozed_until is None
    assert list(ticket.events.values_list("kind", flat=True)) == ["opened"]
    assert not AuditEntry.objects.filter(action="ticket.snooze").exists()


def test_it_refuses_a_time_without_its_zone_and_a_closed_ticket(
    support: Any, ticket: Ticket
) -> None:
    with pytest.raises(TicketActionRefused, match="time zone"):
        ticket_snooze(ticket=ticket, by=support, until=datetime(2099, 1, 1, 9, 0))
    ticket_resolve(ticket=ticket, by=support, note="Cancelled by hand.")
    with pytest.raises(TicketActionRefused, match="closed: there is nothing to snooze"):
        ticket_snooze(ticket=ticket, by=support, until=timezone.now() + timedelta(hours=1))
    with pytest.raises(TicketActionRefused, match="not snoozed"):
        ticket_unsnooze(ticket=ticket, by=support)
    assert not AuditEntry.objects.filter(action="ticket.snooze").exists()


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        ({"until": "custom"}, "Give the date and time to snooze until (UTC)."),
        ({"until": "custom", "at": "next tuesday"}, "Give the date and time as"),
        ({"until": "forever"}, "Select a valid choice"),
        ({}, "Snooze until when? Choose a time."),
        ({"until": "custom", "at": "2020-01-01T09:00"}, "has already passed"),
        ({"until": "custom", "at": "2099-01-01T09:00"}, "is more than 30 days away"),
    ],
)
def test_the_page_refuses_bad_snooze_input_naming_the_problem(
    support: Any, ticket: Ticket, data: dict[str, str], problem: str
) -> None:
    response = logged_in(support).post(f"/console/tickets/{ticket.pk}/snooze/", data)

    assert response.status_code == 400
    assert problem in response.content.decode()
    assert "Not snoozed:" in response.content.decode()
    ticket.refresh_from_db()
    assert ticket.snoozed_until is None
    assert not AuditEntry.objects.filter(action="ticket.snooze").exists()


def test_the_quick_choices(support: Any, ticket: Ticket) -> None:
    now = datetime(2026, 12, 7, 22, 15, tzinfo=UTC)
    choices = snooze_choices(now)
    assert choices["1h"] == datetime(2026, 12, 7, 23, 15, tzinfo=UTC)
    assert choices["tomorrow"] == datetime(2026, 12, 8, 9, 0, tzinfo=UTC)

    client = logged_in(support)
    response = client.post(f"/console/tickets/{ticket.pk}/snooze/", {"until": "tomorrow"})

    assert response.status_code == 302
    ticket.refresh_from_db()
    assert ticket.snoozed_until is not None
    assert (ticket.snoozed_until.hour, ticket.snoozed_until.minute) == (9, 0)
    assert ticket.snoozed_until.date() == (timezone.now() + timedelta(days=1)).date()


def test_a_snoozed_ticket_does_not_call_for_anyone_until_its_time(
    support: Any, agent_a: tuple[Agent, str], settings: Any
) -> None:
    settings.TOOLOPS_NOTIFY_TICKET_UNASSIGNED_S = 0
    a, b = dead_letter(agent_a[0], "r-a"), dead_letter(agent_a[0], "r-b")
    ticket_snooze(ticket=a, by=support, until=timezone.now() + timedelta(hours=1))
    client = logged_in(support)

    # The menu's count and the home count only what waits now; no reminder for it either.
    assert (
        'class="badge count tickets-count" title="1 open ticket"'
        in client.get("/console/tickets/").content.decode()
    )
    home = client.get("/console/").content.decode()
    assert f"/console/tickets/{b.pk}/" in home and f"/console/tickets/{a.pk}/" not in home
    assert tickets_unassigned(now=timezone.now()) == 1
    reminded = NotificationEvent.objects.filter(kind="ticket_unassigned")
    assert set(reminded.values_list("ref", flat=True)) == {str(b.pk)}
