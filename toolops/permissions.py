"""Who may see and do what in the console. Superusers may do what any group may (API.md)."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import TYPE_CHECKING, Any

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied

if TYPE_CHECKING:
    from django.contrib.auth.models import AnonymousUser
    from django.contrib.auth.models import User as Person
    from django.http import HttpRequest, HttpResponse

    User = Person | AnonymousUser

REVIEWERS = "reviewers"
SUPPORT = "support"
OPERATORS = "operators"
CONSOLE_GROUPS = frozenset({REVIEWERS, SUPPORT, OPERATORS})
# Where group_names keeps its answer on the user object, an attribute of no model's: the
# way Django's ModelBackend keeps its _perm_cache.
_GROUPS_CACHE = "_console_groups"


def group_names(user: User) -> frozenset[str]:
    """The user's console groups, read once per request (cached on the user object)."""
    if not user.is_authenticated or not user.is_active:
        return frozenset()
    cached: frozenset[str] | None = getattr(user, _GROUPS_CACHE, None)
    if cached is None:
        names = user.groups.filter(name__in=CONSOLE_GROUPS).values_list("name", flat=True)
        cached = frozenset(names)
        setattr(user, _GROUPS_CACHE, cached)
    return cached


def _is_superuser(user: User) -> bool:
    return bool(user.is_authenticated and user.is_active and getattr(user, "is_superuser", False))


def can_view_console(user: User) -> bool:
    return _is_superuser(user) or bool(group_names(user))


def can_edit_policies(user: User) -> bool:
    return _is_superuser(user) or OPERATORS in group_names(user)


def can_settle_unknown(user: User) -> bool:
    """Settling an unknown outcome by hand tells the agent what happened: operators only."""
    return _is_superuser(user) or OPERATORS in group_names(user)


def can_control_breakers(user: User) -> bool:
    return _is_superuser(user) or OPERATORS in group_names(user)


def role_label(user: User) -> str:
    """The badge next to the user name: 'superuser', or the console groups."""
    if _is_superuser(user):
        return "superuser"
    return " · ".join(sorted(group_names(user)))


def console_required(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Anonymous → the login page; logged in but in no console group → 403."""

    @wraps(view)
    def check(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not can_view_console(request.user):
            raise PermissionDenied("Your account is not in a console group.")
        return view(request, *args, **kwargs)

    return login_required(check)


def require_policy_editor(user: User) -> None:
    if not can_edit_policies(user):
        raise PermissionDenied("Only operators may change tool policies.")


def require_unknown_settler(user: User) -> None:
    if not can_settle_unknown(user):
        raise PermissionDenied("Only operators may settle unknown outcomes.")


def require_breaker_operator(user: User) -> None:
    if not can_control_breakers(user):
        raise PermissionDenied("Only operators may open or reset circuit breakers.")


def can_work_tickets(user: User) -> bool:
    """The support desk: dead-lettered compensations are support staff's to settle."""
    return _is_superuser(user) or SUPPORT in group_names(user)


def require_ticket_worker(user: User) -> None:
    if not can_work_tickets(user):
        raise PermissionDenied("Only support staff may work dead-letter tickets.")


def can_abort_runs(user: User) -> bool:
    return _is_superuser(user) or OPERATORS in group_names(user)


def require_run_aborter(user: User) -> None:
    if not can_abort_runs(user):
        raise PermissionDenied("Only operators may abort runs.")


def can_read_audit(user: User) -> bool:
    """The audit log names people and what they did: operators and superusers (API.md)."""
    return _is_superuser(user) or OPERATORS in group_names(user)


def require_audit_reader(user: User) -> None:
    if not can_read_audit(user):
        raise PermissionDenied("Only operators may read the audit log.")


def can_review(user: User) -> bool:
    """Approvals: whether a held call runs is a reviewer's decision."""
    return _is_superuser(user) or REVIEWERS in group_names(user)


def require_reviewer(user: User) -> None:
    if not can_review(user):
        raise PermissionDenied("Only reviewers may see and decide approvals.")


def can_unlock_logins(user: User) -> bool:
    """Login lockouts (toolops/accounts/lockout.py): seeing who is locked out from where,
    and unlocking them, is an operator's job."""
    return _is_superuser(user) or OPERATORS in group_names(user)


def require_login_unlocker(user: User) -> None:
    if not can_unlock_logins(user):
        raise PermissionDenied("Only operators may see and clear login lockouts.")
