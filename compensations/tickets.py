"""Tickets of the dead-letter queue, written inside the caller's transaction: opened when
a compensation cannot be built or still fails after its retries, closed when it succeeds,
its run completes or a person resolves it, and every step an event on the ticket's
history. The executor's registration, the saga worker and the support desk all write
tickets through these three functions."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.utils import timezone

from compensations import live
from compensations.models import Compensation, Ticket, TicketEvent
from toolops.notify import events as notify

if TYPE_CHECKING:
    from django.contrib.auth.models import User

Kind = TicketEvent.Kind


def ticket_open(compensation: Compensation, reason: str, text: str) -> Ticket:
    now = timezone.now()
    ticket, created = Ticket.objects.get_or_create(
        compensation=compensation,
        defaults={"run_id": compensation.run_id, "tool": compensation.tool, "reason": reason},
    )
    if created:
        opening = ticket_event(ticket, None, Kind.OPENED, text)
        notify.ticket_opened(ticket_pk=ticket.pk, opening=opening.pk)
        return ticket
    kind = Kind.DEAD_LETTERED if ticket.status == Ticket.Status.OPEN else Kind.REOPENED
    if ticket.reason == Ticket.Reason.UNMAPPABLE:
        reason = ticket.reason  # still why: nothing could be sent
    # Failing again or reopened is news: a snooze ends here (snooze.py).
    Ticket.objects.filter(pk=ticket.pk).update(
        status=Ticket.Status.OPEN,
        closed_at=None,
        updated_at=now,
        reason=reason,
        snoozed_until=None,
    )
    opening = ticket_event(ticket, None, kind, text)
    if kind == Kind.REOPENED:
        notify.ticket_opened(ticket_pk=ticket.pk, opening=opening.pk)
    return ticket


def ticket_close(ticket: Ticket, by: User | None, kind: str, text: str) -> None:
    now = timezone.now()
    Ticket.objects.filter(pk=ticket.pk).update(
        status=Ticket.Status.CLOSED, closed_at=now, updated_at=now
    )
    ticket.status, ticket.closed_at = Ticket.Status.CLOSED, now
    ticket_event(ticket, by, kind, text)


def ticket_event(ticket: Ticket, by: User | None, kind: str, text: str) -> TicketEvent:
    event = TicketEvent.objects.create(ticket=ticket, actor=by, kind=kind, text=text[:4000])
    live.tickets_changed(ticket_id=ticket.pk)
    return event
