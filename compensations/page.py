"""What the desk's pages show of a ticket, in a person's words: the queue's row and the
ticket page's live region (re-rendered on every refresh, so it holds no form a person
may be filling in, and no read that must be audited: the contact is read once per page,
views.py)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.shortcuts import get_object_or_404
from django.utils import timezone

from compensations import selectors, wording
from compensations.customer import customer_sentence
from compensations.models import Ticket
from compensations.times import error_words, times_in_text
from toolops.permissions import require_ticket_worker
from toolops.templatetags.when import ago, at_words, relative, waited
from toolops.tools import facts, registry
from toolops.views.common import HtmxHttpRequest, pretty
from traces.services import redact


def get_ticket(request: HtmxHttpRequest, pk: int) -> Ticket:
    """Support staff (and superusers) only; another console user → 403, none → 404."""
    require_ticket_worker(request.user)
    return get_object_or_404(
        Ticket.objects.select_related(
            "run__agent", "assignee", "compensation__call", "compensation__undo_call"
        ),
        pk=pk,
    )


def snoozed(ticket: Ticket, now: datetime) -> bool:
    return bool(ticket.snoozed_until and ticket.snoozed_until > now)


def list_words(ticket: Ticket, now: datetime) -> None:
    """What the desk's list shows of a ticket in plain words, set on the ticket: its title,
    its status as a label, its last error as a sentence naming the service, and whether
    it is snoozed, till when."""
    compensation = ticket.compensation
    undone = compensation.call
    ticket.title = wording.ticket_title(ticket, undone=undone, spec=registry.get(undone.tool))
    ticket.status_words = wording.status_words(compensation.status)
    error = error_words(
        compensation.last_error,
        tool=compensation.tool,
        spec=registry.get(compensation.tool),
        now=now,
    )
    ticket.error_words = error or compensation.problem
    ticket.snooze_words = (
        at_words(ticket.snoozed_until, now) if ticket.snoozed_until and snoozed(ticket, now) else ""
    )


def ticket_context(ticket: Ticket) -> dict[str, Any]:
    """The ticket page's live region."""
    compensation = ticket.compensation
    undone = compensation.call
    undo_spec = registry.get(compensation.tool)
    call_spec = registry.get(undone.tool)
    now = timezone.now()
    events = _events(ticket, now)
    closed = wording.closing(events) if ticket.status == Ticket.Status.CLOSED else None
    is_open = ticket.status == Ticket.Status.OPEN
    health = (
        selectors.undo_health(tool=compensation.tool, spec=undo_spec, now=now) if is_open else None
    )
    rounds = selectors.ticket_rounds(ticket=ticket)
    for round_ in rounds:
        round_.error = error_words(
            round_.call.error_message, tool=compensation.tool, spec=undo_spec, now=now
        )
    retry_at = selectors.retry_at(compensation, now)
    return {
        "ticket": ticket,
        "title": wording.ticket_title(ticket, undone=undone, spec=call_spec),
        "customer": customer_sentence(ticket=ticket),
        "undo_words": wording.tool_words(compensation.tool),
        "status_words": wording.status_words(compensation.status),
        "run_words": wording.run_words(ticket.run.status),
        "undone_title": wording.call_words(undone, call_spec),
        "undone_facts": facts.facts(call_spec, undone.args, undone.result),
        "health": health,
        "last_success_ago": ago(health.last_success, now) if health and health.last_success else "",
        "waited": waited(ticket.opened_at, now),
        "closed_ago": ago(ticket.closed_at, now) if ticket.closed_at else "",
        "closed_by": closed,
        "last_error": error_words(
            compensation.last_error, tool=compensation.tool, spec=undo_spec, now=now
        ),
        "compensation": compensation,
        "retry_at": retry_at,
        "retry_in": relative(retry_at, now) if retry_at else "",
        "snoozed": is_open and snoozed(ticket, now),
        "snooze_words": at_words(ticket.snoozed_until, now) if ticket.snoozed_until else "",
        # A snooze that ended by itself: nothing was written then (no job), so the thread
        # says it here, computed.
        "snooze_ended": is_open and ticket.snoozed_until is not None and not snoozed(ticket, now),
        "undone": undone,
        # Shown to people redacted (traces/sensitive.py): by name, pattern, catalog or schema.
        "undo_args": pretty(redact(compensation.args, spec=undo_spec)),
        "call_args": pretty(redact(undone.args, spec=call_spec)),
        "call_result": pretty(redact(undone.result, spec=call_spec, result=True)),
        "rounds": rounds,
        "events": events,
        "now": now,
    }


def _events(ticket: Ticket, now: datetime) -> list[Any]:
    """The thread, each event's kind in words and any ISO time in its text said plainly."""
    events = list(ticket.events.select_related("actor"))
    for event in events:
        event.words = wording.event_words(event.kind)
        event.said = times_in_text(event.text, now)
    return events
