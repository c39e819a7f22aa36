"""The support desk's actions on a ticket (API.md: "Retry", "Resolve"): assign (to oneself
or to another person who may work tickets), retry through the worker, resolve by hand
with a note, comment, and the bulk forms of the first two, which act on open tickets
only (snoozing is in snooze.py). Each is one transaction that locks the run row first
(as the worker's ending does) and then the ticket. Each shows on the ticket as a
TicketEvent (its thread, which goes with the run at retention) and is audited in the one
audit log (toolops/audit/), which is kept."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from django.db import transaction
from django.db.models.functions import Now
from django.utils import timezone

from compensations.models import Compensation, Ticket, TicketEvent
from compensations.services import (
    ABORT_STATES,
    CompensationStatus,
    Kind,
    breaker_wait,
    run_conclude,
)
from compensations.tickets import ticket_close, ticket_event
from toolops import executor
from toolops.audit.services import Action, audit_record
from toolops.models import IdempotencyRecord, Run, ToolCall
from toolops.permissions import can_work_tickets
from traces import services as traces

if TYPE_CHECKING:
    from django.contrib.auth.models import User


class TicketActionRefused(Exception):
    """A person's action that the ticket's state does not allow; says why, in the desk's
    words (no "compensation": people read it, in a message or beside a bulk action)."""


CHANGED = "The ticket changed meanwhile: reload it and try again."
NOTHING_TO_RETRY = "Nothing to retry: the undo is not waiting for a person."
# Why an undo is not retried, by its state, when that is not "a person must act".
NOT_WAITING: dict[str, str] = {
    CompensationStatus.SUCCEEDED: "The undo was already made: there is nothing to retry.",
    CompensationStatus.RESOLVED: "It was fixed by hand: there is nothing to retry.",
}


def ticket_assign(*, ticket: Ticket, by: User, to: User | None) -> Ticket:
    """Give an open ticket to `to` (a person who may work tickets), or to nobody."""
    if to is not None and not can_work_tickets(to):
        raise TicketActionRefused(_cannot_work(to))
    with transaction.atomic():
        ticket = Ticket.objects.select_for_update().get(pk=ticket.pk)
        if ticket.status == Ticket.Status.CLOSED:
            raise TicketActionRefused("The ticket is closed: there is nothing left to work on.")
        if ticket.assignee_id == (to.pk if to else None):
            return ticket
        ticket.assignee = to
        ticket.updated_at = timezone.now()
        ticket.save(update_fields=["assignee", "updated_at"])
        if to is None:
            ticket_event(ticket, by, Kind.UNASSIGNED, "")
        else:
            ticket_event(ticket, by, Kind.ASSIGNED, f"to {to.get_username()}")
        assignee = to.get_username() if to is not None else None
        audit_record(
            actor=by,
            action=Action.TICKET_ASSIGN,
            obj=ticket,
            detail={"to": assignee},
            summary=f"Assigned to {assignee}" if assignee else "Unassigned",
        )
    return ticket


def _cannot_work(person: User) -> str:
    return (
        f"{person.get_username()} cannot work tickets: only support staff and superusers "
        "can be assigned one."
    )


def ticket_retry(*, ticket: Ticket, by: User) -> Ticket:
    """Run the dead-lettered compensation again, through the worker: a new round of the
    undo call, with the same idempotency key. The ticket stays open until it succeeds."""
    with transaction.atomic():
        Run.objects.select_for_update().filter(pk=ticket.run_id).first()
        ticket = (
            Ticket.objects.select_for_update(of=("self",))
            .select_related("compensation__undo_call")
            .get(pk=ticket.pk)
        )
        compensation = ticket.compensation
        _refuse_retry_unless_waiting(ticket, compensation)
        # An open breaker would refuse it unsent: the round waits for it (the worker
        # checks again when it starts), and the ticket says when it runs.
        until = breaker_wait(tool=compensation.tool, queued_at=None)
        if not Compensation.objects.filter(
            pk=compensation.pk, status=CompensationStatus.DEAD_LETTERED
        ).update(
            status=CompensationStatus.PENDING, queued_at=Now(), finished_at=None, not_before=until
        ):
            raise TicketActionRefused(CHANGED)
        compensation.status, compensation.not_before = CompensationStatus.PENDING, until
        # The last round's record says "failed"; the next round claims the same key anew.
        IdempotencyRecord.objects.filter(
            key=compensation.key, state=IdempotencyRecord.State.RECORDED
        ).delete()
        Run.objects.filter(pk=ticket.run_id, status__in=ABORT_STATES).update(
            status=Run.Status.ABORTING, ended_at=None
        )
        Ticket.objects.filter(pk=ticket.pk).update(updated_at=timezone.now())
        waits = (
            ""
            if until is None
            else f"waits for the {compensation.tool} breaker: runs at {until:%H:%M:%S} UTC"
        )
        ticket_event(ticket, by, Kind.RETRIED, waits)
        audit_record(
            actor=by,
            action=Action.TICKET_RETRY,
            obj=ticket,
            detail={"tool": compensation.tool, "round": compensation.rounds + 1},
            summary=f"Retried {compensation.tool} (round {compensation.rounds + 1})",
        )
        executor.compensations_wake(ticket.run_id)
    return ticket


def _refuse_retry_unless_waiting(ticket: Ticket, compensation: Compensation) -> None:
    """TicketActionRefused, saying why, unless the undo waits for a person and a new round
    can be sent (the ticket and its compensation are locked)."""
    if ticket.status == Ticket.Status.CLOSED:
        raise TicketActionRefused("The ticket is closed: there is nothing left to retry.")
    if compensation.status in (CompensationStatus.PENDING, CompensationStatus.RUNNING):
        raise TicketActionRefused("A retry is already running: wait for its outcome.")
    if compensation.status != CompensationStatus.DEAD_LETTERED:
        raise TicketActionRefused(NOT_WAITING.get(compensation.status, NOTHING_TO_RETRY))
    if compensation.problem:
        raise TicketActionRefused(
            "Its undo cannot be built from the call, so a retry would fail the same "
            "way: undo it by hand, then Resolve with a note."
        )
    last = compensation.undo_call
    if last is not None and last.status == ToolCall.Status.UNKNOWN:
        # Never re-send an unsafe write blindly.
        raise TicketActionRefused(
            f"The last {compensation.tool} went out and its outcome is unknown: check the "
            "downstream, then Resolve with a note."
        )


def ticket_resolve(*, ticket: Ticket, by: User, note: str) -> Ticket:
    """Settled by hand: the compensation becomes `resolved`; a run with nothing else
    open ends `aborted`."""
    note = note.strip()
    if not note:
        raise TicketActionRefused("A note is required: say how the undo was settled.")
    with transaction.atomic():
        Run.objects.select_for_update().filter(pk=ticket.run_id).first()
        ticket = Ticket.objects.select_for_update().select_related("compensation").get(pk=ticket.pk)
        if ticket.status == Ticket.Status.CLOSED:
            raise TicketActionRefused("The ticket is already closed.")
        status = ticket.compensation.status
        if status in (CompensationStatus.PENDING, CompensationStatus.RUNNING):
            raise TicketActionRefused("A retry is running: wait for its outcome.")
        if not Compensation.objects.filter(pk=ticket.compensation_id, status=status).update(
            status=CompensationStatus.RESOLVED, finished_at=timezone.now()
        ):
            raise TicketActionRefused(CHANGED)
        said = _redacted(note, ticket)
        ticket_close(ticket, by, Kind.RESOLVED, said)
        audit_record(
            actor=by,
            action=Action.TICKET_RESOLVE,
            obj=ticket,
            detail={"note": said},
            summary=f"Resolved by hand: {said}",
        )
        Run.objects.filter(pk=ticket.run_id, status=Run.Status.COMPENSATION_FAILED).update(
            status=Run.Status.ABORTING
        )
        run_conclude(run_pk=ticket.run_id)
    return ticket


def ticket_comment(*, ticket: Ticket, by: User, text: str) -> TicketEvent:
    text = text.strip()
    if not text:
        raise TicketActionRefused("A comment cannot be empty.")
    said = _redacted(text, ticket)
    with transaction.atomic():
        Ticket.objects.filter(pk=ticket.pk).update(updated_at=timezone.now())
        event = ticket_event(ticket, by, Kind.COMMENT, said)
        audit_record(
            actor=by,
            action=Action.TICKET_COMMENT,
            obj=ticket,
            detail={"text": said},
            summary=said,
        )
    return event


def _redacted(text: str, ticket: Ticket) -> str:
    """A person's note, stored and shown like every other text about the call: without
    e-mail addresses, card numbers or the sensitive values of the call being undone."""
    call = ToolCall.objects.filter(compensation__ticket=ticket).first()
    return traces.redact_text(text, call=call)


@dataclass
class BulkOutcome:
    """What a bulk action did: the tickets it acted on, the closed ones it skipped, and
    the open ones it could not act on, each with why."""

    done: list[int] = field(default_factory=list)
    skipped: list[int] = field(default_factory=list)
    refused: list[tuple[int, str]] = field(default_factory=list)


def tickets_bulk(
    *, tickets: list[Ticket], by: User, action: str, to: User | None = None
) -> BulkOutcome:
    """Retry or assign many tickets (`action` "retry" or "assign", to `to`, else to `by`).
    Only open tickets are acted on: a closed one is skipped and named. Each ticket is its
    own transaction, and each refusal is reported rather than stopping the rest."""
    if action not in ("retry", "assign"):
        raise TicketActionRefused(f"Unknown action “{action}”: choose Retry or Assign.")
    if action == "assign" and to is not None and not can_work_tickets(to):
        # Said once for all of them, before anything is done.
        raise TicketActionRefused(_cannot_work(to))
    outcome = BulkOutcome()
    for ticket in tickets:
        if ticket.status != Ticket.Status.OPEN:
            outcome.skipped.append(ticket.pk)
            continue
        try:
            if action == "retry":
                ticket_retry(ticket=ticket, by=by)
            else:
                ticket_assign(ticket=ticket, by=by, to=to or by)
        except TicketActionRefused as exc:
            # Closed meanwhile (read before its lock): skipped like the others.
            if Ticket.objects.filter(pk=ticket.pk, status=Ticket.Status.CLOSED).exists():
                outcome.skipped.append(ticket.pk)
            else:
                outcome.refused.append((ticket.pk, str(exc)))
        else:
            outcome.done.append(ticket.pk)
    return outcome
