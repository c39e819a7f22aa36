"""The customer's contact on a ticket, so support can tell them what happened.

The catalog marks which args field holds it (`contact = ["email"]`, toolops/tools/spec.py).
Everything else on the ticket shows args redacted (traces/sensitive.py: an e-mail reads
"[redacted email]"), so the contact is read on purpose from the call's sealed full args —
one field, and only for the page that shows it — and each look is audited as a full-args
read (action `full_args.read`, purpose `ticket_contact`), like a reviewer's look at a
held call's args. The audit entry is written before the value is read: a look that fails
is still a look. Support staff see the ticket already; the look is theirs only because
the ticket's pages refuse everyone else (toolops/permissions.py)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from django.core.exceptions import PermissionDenied, ValidationError
from django.core.validators import validate_email
from django.db import transaction

from compensations.models import Ticket
from toolops.audit.services import Action, audit_record
from toolops.models import ToolCall
from toolops.permissions import can_work_tickets
from toolops.tools import registry
from toolops.tools.facts import field_value
from traces import services as traces
from traces.sensitive import MARK

PURPOSE = "ticket_contact"
PHONE = re.compile(r"^\+?[0-9][0-9 ().-]{5,30}$")


@dataclass(frozen=True)
class Contact:
    """The contact to show: its value and link, or why it cannot be shown."""

    value: str
    href: str  # "mailto:…", "tel:…", or "" (shown as text)
    tool: str  # the call it was read from, and the field
    field: str
    problem: str = ""


def contact_source(*, ticket: Ticket) -> tuple[ToolCall, str] | None:
    """The call and field holding the customer's contact, by the catalog's `contact`
    marks: the ticket's own call first, then the run's other calls in step order."""
    own = ticket.compensation.call
    others = (
        ToolCall.objects.agent_calls()
        .filter(run_id=ticket.run_id)
        .exclude(pk=own.pk)
        .order_by("step_index", "pk")
    )
    for call in [own, *others]:
        spec = registry.get(call.tool)
        for path in spec.contact if spec is not None else ():
            # The stored args say whether the field holds anything (redacted or not).
            if field_value(call.args, None, path) not in (None, ""):
                return call, path
    return None


def ticket_contact_read(*, ticket: Ticket, user: Any, request: Any = None) -> Contact | None:
    """The customer's contact for `user`, who must be able to work tickets; audited. None
    when the catalog marks no contact that the run's calls hold."""
    if not can_work_tickets(user):
        raise PermissionDenied("Only support staff may read a customer's contact.")
    found = contact_source(ticket=ticket)
    if found is None:
        return None
    call, path = found
    with transaction.atomic(savepoint=False):
        audit_record(
            actor=user,
            action=Action.FULL_ARGS_READ,
            obj=call,
            request=request,
            detail={"purpose": PURPOSE, "tool": call.tool, "field": path, "ticket": ticket.pk},
            summary=f"Read the customer's contact ({path} of {call.tool}) on ticket #{ticket.pk}",
        )
    try:
        full = traces.args_open(call)
    except traces.SealedArgsUnavailable:
        return Contact("", "", call.tool, path, "it is kept sealed and could not be read here")
    value = field_value(full, None, path)
    if not isinstance(value, str) or not value.strip() or MARK in value:
        return Contact("", "", call.tool, path, "the call holds no readable value")
    return Contact(value.strip(), _href(value.strip()), call.tool, path)


def _href(value: str) -> str:
    """A mailto: or tel: link for a value that is one; "" for anything else."""
    try:
        validate_email(value)
    except ValidationError:
        pass
    else:
        return f"mailto:{quote(value, safe='@+.-_')}"
    if PHONE.match(value):
        return "tel:" + re.sub(r"[^0-9+]", "", value)
    return ""
