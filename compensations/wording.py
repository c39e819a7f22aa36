"""The support desk in a customer's words. A ticket is titled by what the customer lives
with, not by the machinery: "Refund not made: charge 89.00 EUR to customer cus_42 for
order ord_1 (cancelled run)", built from the undone call's catalog title (tools/facts.py)
and the undo tool's name — never "undo refund". Statuses read as labels a person acts on
("needs a person"); the words of the saga (compensation, dead_lettered, rounds) stay in
the ticket's folded technical details."""

from __future__ import annotations

from typing import Any

from compensations.models import Compensation, Ticket, TicketEvent
from toolops.models import Run, ToolCall
from toolops.tools import facts
from toolops.tools.spec import ToolSpec

CS = Compensation.Status

STATUS_WORDS: dict[str, str] = {
    CS.REGISTERED: "undo ready",
    CS.DISCARDED: "not needed",
    CS.PENDING: "retry queued",
    CS.RUNNING: "retrying",
    CS.SUCCEEDED: "made",
    CS.DEAD_LETTERED: "needs a person",
    CS.RESOLVED: "fixed by hand",
}

EVENT_WORDS: dict[str, str] = {
    TicketEvent.Kind.OPENED: "opened",
    TicketEvent.Kind.REOPENED: "reopened",
    TicketEvent.Kind.ASSIGNED: "assigned",
    TicketEvent.Kind.UNASSIGNED: "unassigned",
    TicketEvent.Kind.RETRIED: "retry",
    TicketEvent.Kind.SUCCEEDED: "made by a retry",
    TicketEvent.Kind.DEAD_LETTERED: "failed again",
    TicketEvent.Kind.RESOLVED: "fixed by hand",
    TicketEvent.Kind.CLOSED: "closed",
    TicketEvent.Kind.COMMENT: "comment",
    TicketEvent.Kind.SNOOZED: "snoozed",
    TicketEvent.Kind.UNSNOOZED: "back from snooze",
}

RUN_WORDS: dict[str, str] = {
    Run.Status.RUNNING: "running",
    Run.Status.COMPLETED: "completed",
    Run.Status.ABORTING: "being cancelled",
    Run.Status.ABORTED: "cancelled",
    Run.Status.COMPENSATION_FAILED: "cancelled, not all put back",
    Run.Status.BUDGET_EXHAUSTED: "out of budget",
}

# The events that close a ticket, and how the closing line says it.
CLOSING: dict[str, str] = {
    TicketEvent.Kind.RESOLVED: "fixed by hand",
    TicketEvent.Kind.SUCCEEDED: "a retry made it",
    TicketEvent.Kind.CLOSED: "nothing left to undo",
}

# A run in one of these was given up on: the undo was meant to put things back.
CANCELLED = (Run.Status.ABORTING, Run.Status.ABORTED, Run.Status.COMPENSATION_FAILED)


def status_words(status: str) -> str:
    """A compensation's status as a label: "dead_lettered" → "needs a person"."""
    return STATUS_WORDS.get(status, status.replace("_", " "))


def run_words(status: str) -> str:
    """A run's status as a label: "compensation_failed" → "cancelled, not all put back"."""
    return RUN_WORDS.get(status, status.replace("_", " "))


def event_words(kind: str) -> str:
    return EVENT_WORDS.get(kind, kind.replace("_", " "))


def retry_queued(compensation: Compensation) -> str:
    """What a person is told on pressing Retry: when the worker runs the undo."""
    if compensation.not_before is not None:
        return (
            f"Retry scheduled: the {compensation.tool} breaker is open, so the worker runs "
            f"{compensation.tool} at {compensation.not_before:%H:%M:%S} UTC, when it lets a "
            "call through; its attempts appear below."
        )
    return f"Retry queued: the worker runs {compensation.tool} again; its attempts appear below."


def tool_words(tool: str) -> str:
    """ "cancel_order" → "Cancel order"."""
    return tool.replace("_", " ").replace("-", " ").capitalize()


def call_words(call: ToolCall, spec: ToolSpec | None) -> str:
    """The undone call as a phrase to follow a colon: its catalog title, first letter low."""
    said = facts.title(spec, call.args, call.result, tool=call.tool) if spec else ""
    if not said or said == call.tool:
        return f"{call.tool} ({call.tool_call_id})"
    return said[0].lower() + said[1:]


def ticket_title(ticket: Ticket, *, undone: ToolCall, spec: ToolSpec | None) -> str:
    """What the customer lives with, in one line (see the module docstring)."""
    undo = tool_words(ticket.tool)
    status = ticket.compensation.status
    what = call_words(undone, spec)
    if status == CS.RESOLVED:
        return f"{undo} fixed by hand: {what}"
    if status == CS.SUCCEEDED:
        return f"{undo} made after a retry: {what}"
    if ticket.status == Ticket.Status.CLOSED:
        return f"{undo} no longer needed: {what}"
    cancelled = " (cancelled run)" if ticket.run.status in CANCELLED else ""
    if ticket.reason == Ticket.Reason.UNMAPPABLE:
        return f"{undo} could not be sent: {what}{cancelled}"
    return f"{undo} not made: {what}{cancelled}"


def closing(events: list[Any]) -> tuple[Any, str] | None:
    """The event that closed the ticket and how it closed, or None (still open)."""
    for event in reversed(events):
        if event.kind in CLOSING:
            return event, CLOSING[event.kind]
        if event.kind in (TicketEvent.Kind.OPENED, TicketEvent.Kind.REOPENED):
            return None
    return None


def tickets_words(count: int, what: str = "ticket") -> str:
    """ "1 ticket", "2 closed tickets"."""
    return f"{count} {what}{'s' if count != 1 else ''}"


def numbers(pks: list[int]) -> str:
    return ", ".join(f"#{pk}" for pk in pks)


def bulk_done(*, action: str, to: str, done: list[int], skipped: list[int]) -> str:
    """What a bulk action did, in one line: "Assigned 2 tickets to you: #1, #3; skipped 2
    closed tickets: #4, #7." `to`: "you" or the assignee's name."""
    parts = []
    if done:
        verb = "Retry queued for" if action == "retry" else "Assigned"
        whom = f" to {to}" if action != "retry" else ""
        parts.append(f"{verb} {tickets_words(len(done))}{whom}: {numbers(done)}")
    if skipped:
        closed = tickets_words(len(skipped), "closed ticket")
        parts.append(f"skipped {closed}: {numbers(skipped)} (only open tickets are acted on)")
    said = "; ".join(parts)
    return f"{said[:1].upper()}{said[1:]}." if said else ""


def bulk_refused(*, action: str, pk: int, why: str) -> str:
    """One open ticket a bulk action could not act on: "#5 not retried: a retry is…"."""
    verb = "retried" if action == "retry" else "assigned"
    return f"#{pk} not {verb}: {why[:1].lower()}{why[1:]}"
