"""What a notification says, worked out by the worker when it sends an event (so it reads
the state of the moment: an approval decided in the meantime is not announced). Plain
text: a subject, a few sentences, the business facts as (label, value) pairs and one
link; the channels lay them out (e-mail lines, a chat message's fields). Titles and facts
come from the catalog (toolops/tools/facts.py), redacted."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from django.conf import settings
from django.utils import timezone

from compensations.models import Ticket
from toolops.approvals.models import Approval
from toolops.models import CircuitBreaker, ToolCall
from toolops.notify.models import Kind, NotificationEvent
from toolops.templatetags.when import day_words
from toolops.tools import registry
from toolops.tools.catalog import CatalogError
from toolops.tools.facts import facts, title
from toolops.tools.reversibility import reversibility
from toolops.tools.spec import ToolSpec
from toolops.tools.wording import error_sentence


@dataclass
class Content:
    subject: str
    text: str
    link: str
    fields: list[tuple[str, str]] = field(default_factory=list)


class Moot(Exception):
    """Nothing to tell any more; the message says why (kept on the event)."""


# Each kind's subject reads "<what happened>: <to what>"; a message that folds several
# events of one kind counts them with these words (`counted`).
COUNTED: dict[str, str] = {
    Kind.APPROVAL_WAITING: "approvals wait",
    Kind.APPROVAL_EXPIRING: "approvals expire unless decided",
    Kind.TICKET_OPENED: "tickets opened",
    Kind.TICKET_UNASSIGNED: "tickets wait with nobody on them",
    Kind.BREAKER_OPENED: "tools switched off",
}


def how_many(events: Sequence[NotificationEvent]) -> str:
    """The events counted by what they are: "3 approvals wait", "2 things need you"."""
    kinds = {event.kind for event in events}
    noun = COUNTED.get(events[0].kind, "") if len(kinds) == 1 else ""
    return f"{len(events)} {noun or 'things need you'}"


def counted(events: Sequence[NotificationEvent]) -> str:
    """One subject for events folded into one message, counting them and naming the
    first: "3 approvals wait: Charge 89.00 EUR … and 2 more"."""
    first = events[0].subject
    if len(events) == 1:
        return first
    # Of one kind, the count names the kind: the first's subject loses its own.
    one_kind = len({event.kind for event in events}) == 1 and events[0].kind in COUNTED
    what = first.split(": ", 1)[-1] if one_kind else first
    return f"{how_many(events)}: {what} and {len(events) - 1} more"


def absolute(path: str) -> str:
    return settings.TOOLOPS_PUBLIC_URL.rstrip("/") + path


def build(event: NotificationEvent) -> Content:
    """The event's message now. Raises Moot when it no longer needs anyone."""
    builders: dict[str, Callable[[NotificationEvent], Content]] = {
        Kind.APPROVAL_WAITING: _approval,
        Kind.APPROVAL_EXPIRING: _approval,
        Kind.TICKET_OPENED: _ticket,
        Kind.TICKET_UNASSIGNED: _ticket,
        Kind.BREAKER_OPENED: _breaker,
    }
    return builders[event.kind](event)


def _spec(tool: str) -> ToolSpec | None:
    try:
        return registry.get(tool)
    except CatalogError:
        return None


def _spec_title(call: ToolCall) -> tuple[str, list[tuple[str, str]]]:
    spec = _spec(call.tool)
    return title(spec, call.args, call.result, tool=call.tool), facts(spec, call.args, call.result)


def _approval(event: NotificationEvent) -> Content:
    approval = Approval.objects.select_related("run__agent").filter(approval_id=event.ref).first()
    call = ToolCall.objects.filter(approval=approval).first() if approval else None
    if approval is None or call is None:
        raise Moot("The approval no longer exists.")
    if approval.status != Approval.Status.PENDING:
        raise Moot(f"The approval was {approval.status} before it was sent.")
    if approval.expires_at <= timezone.now():
        raise Moot("The approval expired before it was sent.")
    heading, pairs = _spec_title(call)
    # Absolute: the message may be read an hour later, when "2 minutes left" is false.
    by = day_words(approval.expires_at)
    agent = approval.run.agent.name
    said = reversibility(call.tool, _spec(call.tool)).sentence
    if event.kind == Kind.APPROVAL_EXPIRING:
        subject = f"Expires {by}: {heading}"
        text = (
            f"Agent {agent} still waits for a decision on this call; it is refused unless "
            f"someone decides by {by}. {said}"
        )
    else:
        subject = f"Approval waiting: {heading}"
        text = f"Agent {agent} asks to run this call and waits for a decision until {by}. {said}"
    pairs = [("Tool", call.tool), *pairs, ("Agent", agent), ("Decide by", by)]
    return Content(subject, text, absolute(f"/console/approvals/{approval.approval_id}/"), pairs)


def _ticket(event: NotificationEvent) -> Content:
    ticket = (
        Ticket.objects.select_related("compensation__call", "assignee", "run")
        .filter(pk=int(event.ref))
        .first()
    )
    if ticket is None or ticket.status != Ticket.Status.OPEN:
        raise Moot("The ticket was closed before it was sent.")
    if event.kind == Kind.TICKET_UNASSIGNED and ticket.assignee_id is not None:
        raise Moot(f"The ticket was taken by {ticket.assignee} before it was sent.")
    undo = ticket.compensation
    done, _ = _spec_title(undo.call)
    undo_title = title(_spec(undo.tool), undo.args or {}, tool=undo.tool)
    text = (
        f"Not made: {undo_title}. It was to undo: {done}. Until someone retries it or "
        "settles it by hand, the customer is left with what was done."
    )
    nobody = " with nobody on it" if event.kind == Kind.TICKET_UNASSIGNED else ""
    subject = f"Ticket #{ticket.pk}{nobody}: {undo_title} was not made"
    pairs = [("Not made", undo_title), ("It undoes", done), ("Run", ticket.run.run_id)]
    pairs.append(("Open since", day_words(ticket.opened_at)))
    if undo.last_error:
        plain = error_sentence(undo.last_error, tool=undo.tool, spec=_spec(undo.tool))
        pairs.append(("Last error", plain[:200]))
    return Content(subject, text, absolute(f"/console/tickets/{ticket.pk}/"), pairs)


def _breaker(event: NotificationEvent) -> Content:
    breaker = CircuitBreaker.objects.filter(tool=event.ref).first()
    if breaker is None or breaker.state == CircuitBreaker.State.CLOSED:
        raise Moot("The tool was back in service before it was sent.")
    why = breaker.reason or "too many failures"
    subject = f"Tool switched off: {breaker.tool}, after {why}"
    text = (
        f"Calls to {breaker.tool} are refused for now (its circuit breaker opened after "
        f"{breaker.reason or 'too many failures'}); it is tried again after the cool-down."
    )
    pairs = [("Tool", breaker.tool), ("Why", breaker.reason or "too many failures")]
    if breaker.open_until:
        pairs.append(("Tried again", f"from {day_words(breaker.open_until)}"))
    return Content(subject, text, absolute("/console/health/"), pairs)
