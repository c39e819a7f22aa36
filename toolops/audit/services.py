"""Writing the audit log. `audit_record` is the one way in: it runs inside the action's
own transaction (so an action rolled back leaves no entry, and an entry never exists
without its action) and copies what it needs to outlive the objects it names."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.db import transaction

from toolops.audit.models import AuditEntry
from traces import sensitive

if TYPE_CHECKING:
    from django.http import HttpRequest

Action = AuditEntry.Action
MAX_SUMMARY = 2000


class NotInTransaction(Exception):
    """audit_record was called outside the action's transaction."""


@dataclass(frozen=True)
class Ref:
    """An object that has no row to pass (a username that was locked out, say)."""

    type: str
    id: str
    url: str = ""


def audit_record(
    *,
    actor: Any,
    action: str,
    obj: Any = None,
    detail: dict[str, Any] | None = None,
    summary: str = "",
    request: HttpRequest | None = None,
) -> AuditEntry:
    """One entry for one human action. `actor` is the person (None or an anonymous user
    for a command run from a shell, or for the system acting on someone's behalf);
    `obj` is a model instance or a Ref. Call it inside the action's transaction.atomic."""
    if action not in Action.values:
        raise ValueError(f"unknown audit action {action!r}")
    if not transaction.get_connection().in_atomic_block:
        raise NotInTransaction("audit_record runs inside the action's transaction.atomic()")
    person = actor if getattr(actor, "pk", None) else None
    ref = object_ref(obj)
    # A note, a reason or a policy value can quote what a redacted arg held: stored like
    # every other text ToolOps keeps (key names, e-mail addresses, card numbers).
    clean = sensitive.redact_value(detail or {}).value
    return AuditEntry.objects.create(
        actor=person,
        actor_username=person.get_username() if person else "",
        actor_name=_display_name(person),
        action=action,
        object_type=ref.type,
        object_id=ref.id[:200],
        object_url=ref.url[:300],
        summary=sensitive.scrub(summary)[:MAX_SUMMARY],
        detail=clean,
        address=_address(request),
    )


def _display_name(person: Any) -> str:
    if person is None:
        return ""
    full = person.get_full_name() if hasattr(person, "get_full_name") else ""
    return str(full or person.get_username())[:300]


def _address(request: HttpRequest | None) -> str | None:
    if request is None:
        return None
    # REMOTE_ADDR only: a forwarded header is the client's to write.
    return request.META.get("REMOTE_ADDR") or None


def object_ref(obj: Any) -> Ref:
    """The object's type, id and console link, as text that outlives the object."""
    if obj is None:
        return Ref("", "")
    if isinstance(obj, Ref):
        return obj
    name = type(obj).__name__
    link = _LINKS.get(name)
    if link is None:
        return Ref(name.lower(), str(obj.pk))
    kind, ident, url = link
    value = ident(obj)
    return Ref(kind, value, url(obj))


# Model name → (type shown, id shown, console link). Links are built by hand, not with
# reverse(): an entry keeps the path it was written with.
_LINKS: dict[str, tuple[str, Any, Any]] = {
    "Run": ("run", lambda o: o.run_id, lambda o: f"/console/runs/{o.pk}/"),
    "ToolCall": ("call", lambda o: o.call_id, lambda o: f"/console/calls/{o.call_id}/"),
    "Approval": (
        "approval",
        lambda o: o.approval_id,
        lambda o: f"/console/approvals/{o.approval_id}/",
    ),
    "Ticket": ("ticket", lambda o: str(o.pk), lambda o: f"/console/tickets/{o.pk}/"),
    "CircuitBreaker": ("breaker", lambda o: o.tool, lambda o: "/console/health/"),
    "ToolPolicy": ("policy", lambda o: o.tool, lambda o: f"/console/tools/{o.tool}/policy/"),
    "Agent": ("agent", lambda o: o.name, lambda o: "/console/agents/"),
}
