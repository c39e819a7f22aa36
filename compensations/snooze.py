"""Snoozing a ticket: a person puts an open ticket aside until a time (the payments team
answers tomorrow at 09:00), and it leaves the desk's Open list meanwhile. It comes back
by itself: the list compares `snoozed_until` with now when it is read, so no job has to
wake it. A new failure or a reopening ends the snooze at once (tickets.py): news is never
snoozed. Each snooze and un-snooze is an event on the ticket's thread and an audit entry."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from django.db import transaction
from django.utils import timezone

from compensations.desk import TicketActionRefused
from compensations.models import Ticket, TicketEvent
from compensations.tickets import ticket_event
from toolops.audit.services import Action, audit_record
from toolops.templatetags.when import at_words, clock, day_words

if TYPE_CHECKING:
    from django.contrib.auth.models import User

# Longer, and the ticket would be forgotten rather than put aside.
SNOOZE_MAX = timedelta(days=30)


def snooze_problem(until: datetime, now: datetime) -> str:
    """Why `until` cannot be a snooze's end ("" if it can): it has passed, or it is more
    than SNOOZE_MAX away. Said with the time the person chose, and what would do."""
    if timezone.is_naive(until):
        return "Say the time with its time zone (the desk's times are UTC)."
    if until <= now:
        return f"{at_words(until, now)} has already passed: choose a time to come."
    latest = now + SNOOZE_MAX
    if until > latest:
        return (
            f"{clock(until, now)} is more than {SNOOZE_MAX.days} days away: snooze at most "
            f"until {clock(latest, now)}."
        )
    return ""


def ticket_snooze(*, ticket: Ticket, by: User, until: datetime) -> Ticket:
    """Put an open ticket aside until `until` (after now, within 30 days)."""
    now = timezone.now()
    problem = snooze_problem(until, now)
    if problem:
        raise TicketActionRefused(problem)
    with transaction.atomic():
        ticket = Ticket.objects.select_for_update().get(pk=ticket.pk)
        if ticket.status != Ticket.Status.OPEN:
            raise TicketActionRefused("The ticket is closed: there is nothing to snooze.")
        ticket.snoozed_until, ticket.updated_at = until, now
        ticket.save(update_fields=["snoozed_until", "updated_at"])
        # Stored absolute: "in 3 h" would be wrong by the time anyone reads it.
        said = f"until {day_words(until)}"
        ticket_event(ticket, by, TicketEvent.Kind.SNOOZED, said)
        audit_record(
            actor=by,
            action=Action.TICKET_SNOOZE,
            obj=ticket,
            detail={"until": until.isoformat(timespec="seconds")},
            summary=f"Snoozed {said}",
        )
    return ticket


def ticket_unsnooze(*, ticket: Ticket, by: User) -> Ticket:
    """Bring a snoozed ticket back to the Open list now."""
    now = timezone.now()
    with transaction.atomic():
        ticket = Ticket.objects.select_for_update().get(pk=ticket.pk)
        if ticket.snoozed_until is None or ticket.snoozed_until <= now:
            raise TicketActionRefused("The ticket is not snoozed: it is in the Open list.")
        was = ticket.snoozed_until
        ticket.snoozed_until, ticket.updated_at = None, now
        ticket.save(update_fields=["snoozed_until", "updated_at"])
        ticket_event(ticket, by, TicketEvent.Kind.UNSNOOZED, "")
        audit_record(
            actor=by,
            action=Action.TICKET_SNOOZE,
            obj=ticket,
            detail={"until": None, "was": was.isoformat(timespec="seconds")},
            summary=f"Un-snoozed (it was snoozed until {day_words(was)})",
        )
    return ticket


def snooze_choices(now: datetime) -> dict[str, datetime]:
    """The quick choices, by name: in an hour, and tomorrow at 09:00 UTC."""
    tomorrow = (now + timedelta(days=1)).replace(hour=9, minute=0, second=0, microsecond=0)
    return {"1h": now + timedelta(hours=1), "tomorrow": tomorrow}
