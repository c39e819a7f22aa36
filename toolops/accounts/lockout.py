"""Login lockout: what axes needs from ToolOps (the client's address, the 429 page) and
what an operator sees and clears.

axes counts failed logins per (username, address) in its own table, so every web process
shares the count; this module only reads and deletes those rows."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from axes.helpers import get_client_username, get_cool_off, get_failure_limit
from axes.models import AccessAttempt
from django.conf import settings
from django.db import transaction
from django.db.models import Max, Sum
from django.shortcuts import render
from django.utils import timezone

from toolops.audit.services import Action, Ref, audit_record

if TYPE_CHECKING:
    from django.http import HttpRequest, HttpResponse

log = logging.getLogger(__name__)


def client_address(request: HttpRequest) -> str | None:
    """The address a login is counted against: the TCP peer as the ASGI server reports it.

    Never a header a client can write (X-Forwarded-For): anyone could then pick a fresh
    address per guess. Behind a reverse proxy, the server itself puts the client's address
    here when told to trust that proxy (uvicorn `--forwarded-allow-ips`)."""
    return request.META.get("REMOTE_ADDR") or None


def cool_off() -> timedelta:
    return get_cool_off() or timedelta(0)


@dataclass(frozen=True)
class Lockout:
    username: str
    ip_address: str
    failures: int
    since: datetime  # the failure that locked it (a try while locked is not counted)

    @property
    def until(self) -> datetime:
        return self.since + cool_off()


def lockouts_current() -> list[Lockout]:
    """Every (username, address) locked now, newest first. One grouped query."""
    threshold = timezone.now() - cool_off()
    rows = (
        AccessAttempt.objects.filter(attempt_time__gte=threshold)
        .values("username", "ip_address")
        .annotate(failures=Sum("failures_since_start"), since=Max("attempt_time"))
        .filter(failures__gte=settings.AXES_FAILURE_LIMIT)
        .order_by("-since")
    )
    return [
        Lockout(
            username=row["username"] or "",
            ip_address=row["ip_address"] or "",
            failures=row["failures"],
            since=row["since"],
        )
        for row in rows
    ]


def lockout_get(*, username: str, ip_address: str | None) -> Lockout | None:
    for lockout in lockouts_current():
        if lockout.username == username and lockout.ip_address == (ip_address or ""):
            return lockout
    return None


def lockout_clear(
    *, username: str, ip_address: str, by: Any, request: HttpRequest | None = None
) -> int:
    """`by` (an operator) forgets the pair's failed logins, which ends its lockout. The
    number of rows cleared (0: it was not locked, or its lock had ended); only a lock
    that was there is audited."""
    with transaction.atomic():
        attempts = AccessAttempt.objects.filter(username=username, ip_address=ip_address)
        count, _ = attempts.delete()
        if count:
            audit_record(
                actor=by,
                action=Action.LOGIN_UNLOCK,
                obj=Ref("login", username),
                detail={"username": username, "address": ip_address},
                summary=f"Unlocked the login of {username} from {ip_address}",
                request=request,
            )
    if count:
        log.warning(
            "login lockout of %r from %s cleared by %s", username, ip_address, by.get_username()
        )
    return count


def lockout_response(
    request: HttpRequest, original_response: Any = None, credentials: dict[str, Any] | None = None
) -> HttpResponse:
    """axes' AXES_LOCKOUT_CALLABLE: the 429 page, in the console's look, saying for which
    username and address the login is locked and until when.

    The credentials come from the request: axes' async middleware passes them in the place
    of `original_response`."""
    credentials = getattr(request, "axes_credentials", None) or credentials
    username = get_client_username(request, credentials) or ""
    address = getattr(request, "axes_ip_address", None) or client_address(request)
    lockout = lockout_get(username=username, ip_address=address)
    until = lockout.until if lockout else timezone.now() + cool_off()
    seconds = max(1, int((until - timezone.now()).total_seconds()))
    minutes = (seconds + 59) // 60
    context = {
        "username": username,
        "address": address,
        "until": until,
        "minutes": minutes,
        "failure_limit": get_failure_limit(request, credentials),
        "cool_off_minutes": int(cool_off().total_seconds() // 60),
    }
    response = render(request, "console/locked.html", context, status=429)
    response["Retry-After"] = str(seconds)
    return response
