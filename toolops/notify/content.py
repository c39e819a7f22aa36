"""What a notification says, worked out by the worker when it sends an event (so it reads
the state of the moment: an approval decided in the meantime is not announced). Plain
text: a subject, a few sentences, the business facts as (label, value) pairs and one
link; the channels lay them out (e-mail lines, a chat message's fields). Titles and facts
come from the catalog (toolops/tools/facts.py), redacted."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from django.conf import settings
from django.utils import timezone

from compensations.models import Ticket
from toolops.approvals.models import Approval
from toolops.models import CircuitBreaker, ToolCall
from toolops.notify.models import Kind, NotificationEvent
from toolops.tools import registry
from toolops.tools.catalog import CatalogError
from toolops.tools.facts import facts, title
from toolops.tools.spec import ToolSpec


@dataclass
class Content:
    subject: str
    text: str
    link: str
    fields: list[tuple[str, str]] = field(default_factory=list)


class Moot(Exception):
    """Nothing to tell any more; the message says why (kept on the event)."""


def absolute(path: str) -> str:
    return settings.TOOLOPS_PUBLIC_URL.rstrip("/") + path


def build(event: NotificationEvent) -> Content:
    """The event's message now. Raises Moot when it no longer needs anyone."""
    builders = {
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


def time_left(until: datetime) -> str:
    seconds = int((until - timezone.now()).total_seconds())
    if seconds <= 0:
        return "no time"
    if seconds < 120:
        return f"{seconds} seconds"
    if seconds < 7200:
        return f"{seconds // 60} minutes"
    return f"{seconds // 3600} hours"


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
    left = f"{time_left(approval.expires_at)} left"
    agent = approval.run.agent.name
    if event.kind == Kind.APPROVAL_EXPIRING:
        subject = f"Expiring soon ({left}): {heading}"
        text = (
            f"Agent {agent} still waits for a decision on this call; it is refused unless "
            f"someone decides ({left})."
        )
    else:
        subject = f"Approval waiting: {heading}"
        text = (
            f"Agent {agent} asks to run this call and waits for a decision ({left}): "
            f"{approval.get_reason_display()}."
        )
    pairs = [
        ("Tool", call.tool),
        *pairs,
        ("Agent", agent),
        ("Time left", time_left(approval.expires_at)),
    ]
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
    if event.kind == Kind.TICKET_UNASSIGNED:
        waited = time_since(ticket.opened_at)
        subject = f"Ticket #{ticket.pk}, {waited} with nobody on it: {undo_title} was not made"
    else:
        subject = f"Ticket #{ticket.pk}: {undo_title} was not made"
    pairs = [("Not made", undo_title), ("It undoes", done), ("Run", ticket.run.run_id)]
    if undo.last_error:
        pairs.append(("Last error", undo.last_error[:200]))
    return Content(subject, text, absolute(f"/console/tickets/{ticket.pk}/"), pairs)


def time_since(moment: datetime) -> str:
    minutes = int((timezone.now() - moment).total_seconds() // 60)
    if minutes < 120:
        return f"{minutes} minutes"
    return f"{minutes // 60} hours"


def _breaker(event: NotificationEvent) -> Content:
    breaker = CircuitBreaker.objects.filter(tool=event.ref).first()
    if breaker is None or breaker.state == CircuitBreaker.State.CLOSED:
        raise Moot("The tool was back in service before it was sent.")
    subject = f"Tool {breaker.tool} switched off: {breaker.reason or 'too many failures'}"
    text = (
        f"Calls to {breaker.tool} are refused for now (its circuit breaker opened after "
        f"{breaker.reason or 'too many failures'}); it is tried again after the cool-down."
    )
    pairs = [("Tool", breaker.tool), ("Why", breaker.reason or "too many failures")]
    if breaker.open_until:
        pairs.append(("Tried again", f"in {time_left(breaker.open_until)}"))
    return Content(subject, text, absolute("/console/health/"), pairs)
