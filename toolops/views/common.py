"""What every console page shares: the request type, the context base.html needs, and
small helpers for the tool catalog and for showing JSON (`pretty`, from
traces/console/pretty.py, where the run timeline reads it too).

Other apps' console pages (compensations, traces) import `page_context` from here, so
their pages get the same nav, role badge and nav counts."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from django.http import Http404
from django.utils import timezone

from compensations.models import Ticket
from toolops import live
from toolops.approvals.models import Approval
from toolops.models import ToolCall
from toolops.permissions import (
    can_edit_policies,
    can_read_audit,
    can_review,
    can_unlock_logins,
    can_work_tickets,
    role_label,
)
from toolops.tools import registry
from toolops.tools.catalog import CatalogError
from toolops.tools.spec import ToolSpec
from traces.console.pretty import pretty

if TYPE_CHECKING:
    from django.contrib.auth.models import User
    from django.http import HttpRequest
    from django_htmx.middleware import HtmxDetails

    class HtmxHttpRequest(HttpRequest):
        """A console page's request. Console pages are behind console_required (which
        logs in first), so their user is a person who signed in, never AnonymousUser."""

        htmx: HtmxDetails
        user: User

else:
    from django.http import HttpRequest as HtmxHttpRequest

__all__ = [
    "NAV_COUNTS",
    "HtmxHttpRequest",
    "catalog",
    "first_sentence",
    "get_catalog_tool",
    "page_context",
    "pretty",
]


def _unknown_count() -> int:
    # Cases only a person can close. One COUNT on (status, created_at).
    return ToolCall.objects.agent_calls().filter(status=ToolCall.Status.UNKNOWN).count()


# The nav badges: context name → how to count it. Every console page pays one query per
# entry, so each must be a single cheap, indexed COUNT. A new badge is one line here and
# one `{% if name %}` in base.html.
def _open_tickets() -> int:
    # Dead-lettered compensations waiting for support now: a snoozed one is put aside
    # until its time (compensations/snooze.py). One COUNT on (status, opened_at).
    return Ticket.objects.awake(timezone.now()).count()


def _pending_approvals() -> int:
    # Calls waiting for a reviewer. One COUNT on (status, created_at).
    return Approval.objects.pending().count()


NAV_COUNTS: dict[str, Callable[[], int]] = {
    "unknown_count": _unknown_count,
    "open_tickets": _open_tickets,
    "pending_approvals": _pending_approvals,
}


def page_context(request: HttpRequest, nav: str, **ctx: Any) -> dict[str, Any]:
    """The page's own context `ctx` plus what templates/console/base.html needs: the
    current nav entry (`nav`), the user's role, and the nav badge counts."""
    return {
        "nav": nav,
        "role": role_label(request.user),
        "can_edit_policies": can_edit_policies(request.user),
        "can_work_tickets": can_work_tickets(request.user),
        "can_review": can_review(request.user),
        "can_read_audit": can_read_audit(request.user),
        "can_unlock_logins": can_unlock_logins(request.user),
        **{name: count() for name, count in NAV_COUNTS.items()},
        **ctx,
    }


def first_sentence(text: str) -> str:
    # Ids may hold dots ("tc-1.2") but never spaces, so a sentence ends at ". ".
    head, sep, _ = text.partition(". ")
    return f"{head}." if sep else text


def catalog() -> dict[str, ToolSpec]:
    """The catalog's tools, or none when it cannot be loaded (the tools page says why)."""
    try:
        return registry.load()
    except CatalogError:
        return {}


def get_catalog_tool(name: str) -> ToolSpec:
    """The tool as the catalog declares it (no policy applied); unknown → 404."""
    try:
        spec = registry.load().get(name)
    except CatalogError:
        spec = None
    if spec is None:
        raise Http404("no such tool")
    return spec


# How often a live page polls when nothing pushes changes to it (no REDIS_URL).
POLL_S = 3


def live_context(*, push_path: str, **ctx: Any) -> dict[str, Any]:
    """What a live region's template needs: pushed over `push_path` (a WebSocket, with
    REDIS_URL), or polled every POLL_S seconds."""
    return {"pushed": live.pushed(), "push_path": push_path, "poll_s": POLL_S, **ctx}


def is_refresh(request: HtmxHttpRequest) -> bool:
    """An htmx request for a live region alone (not a page load or a history restore)."""
    return bool(request.htmx and not request.htmx.history_restore_request)
