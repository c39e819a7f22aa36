"""TOTP two-factor (django-otp): enrolment, and the login's second step.

A user with a confirmed device is not logged in by the password alone: the password step
leaves a pending login in the session, and only the right code turns it into a session
(and a wrong one counts as a failed login for the lockout). So no page, WebSocket or admin
view ever sees a user who has given only the password."""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth import login as auth_login
from django.db import transaction
from django.utils import timezone
from django_otp import DEVICE_ID_SESSION_KEY, verify_token
from django_otp import login as otp_login
from django_otp.models import Device
from django_otp.plugins.otp_totp.models import TOTPDevice

from toolops.permissions import REVIEWERS, group_names

if TYPE_CHECKING:
    from django.http import HttpRequest

PENDING_KEY = "toolops_pending_login"
# The code step must follow the password step soon; a stale half-login is forgotten.
PENDING_S = 300
DEVICE_NAME = "console"


def requires_two_factor(user: Any) -> bool:
    """TOOLOPS_REQUIRE_2FA: reviewers (who approve charges) and superusers."""
    if not settings.TOOLOPS_REQUIRE_2FA:
        return False
    if getattr(user, "is_superuser", False):
        return True
    return REVIEWERS in group_names(user)


def session_may_proceed(user: Any, session: Any) -> bool:
    """For what sees a session without Django's middleware (the live pages' WebSockets):
    False while `user` must use two-factor and `session` was not verified by a device."""
    if not requires_two_factor(user):
        return True
    persistent_id = session.get(DEVICE_ID_SESSION_KEY) if session is not None else None
    device = Device.from_persistent_id(persistent_id) if persistent_id else None
    return device is not None and device.user_id == user.pk and bool(device.confirmed)


def confirmed_device(user: Any) -> TOTPDevice | None:
    return TOTPDevice.objects.filter(user=user, confirmed=True).order_by("pk").first()


def throttle_wait(device: TOTPDevice) -> int:
    """Seconds before `device` checks another code: django-otp doubles the pause after each
    wrong code (1, 2, 4 … s), so codes cannot be tried at the speed of requests."""
    allowed, data = device.verify_is_allowed()
    if allowed or not data or "locked_until" not in data:
        return 0
    return max(1, math.ceil((data["locked_until"] - timezone.now()).total_seconds()))


def pending_start(request: HttpRequest, *, user: Any, next_url: str) -> None:
    """The password was right and the user has a device: wait for the code."""
    request.session[PENDING_KEY] = {
        "user": user.pk,
        "backend": user.backend,
        "at": int(time.time()),
        "next": next_url,
    }


def pending_user(request: HttpRequest) -> tuple[Any, dict[str, Any]] | None:
    """The user whose password step passed within PENDING_S, and the pending record."""
    pending = request.session.get(PENDING_KEY)
    if not isinstance(pending, dict) or time.time() - pending.get("at", 0) > PENDING_S:
        return None
    user_pk = pending.get("user")
    if user_pk is None:
        return None
    user = get_user_model().objects.filter(pk=user_pk, is_active=True).first()
    return (user, pending) if user is not None else None


def pending_finish(request: HttpRequest, *, code: str) -> bool:
    """Check the pending user's code; right → logged in, verified by the device."""
    found = pending_user(request)
    if found is None:
        return False
    user, pending = found
    device = confirmed_device(user)
    # verify_token locks the device row: its throttle (a growing pause after each wrong
    # code) and its last-used counter (no code twice) hold across processes.
    if device is None or verify_token(user, device.persistent_id, code) is None:
        return False
    del request.session[PENDING_KEY]
    auth_login(request, user, backend=pending["backend"])
    otp_login(request, device)
    return True


def device_for_enrolment(*, user: Any) -> TOTPDevice:
    """The user's unconfirmed device (made now if there is none): its secret is shown until
    a code from it confirms it."""
    device = TOTPDevice.objects.filter(user=user, confirmed=False).order_by("pk").first()
    if device is None:
        device = TOTPDevice.objects.create(user=user, name=DEVICE_NAME, confirmed=False)
    return device


def device_confirm(request: HttpRequest, *, code: str) -> bool:
    """A code from the unconfirmed device proves the person holds its secret: it becomes
    the user's device, and this session counts as verified by it."""
    user = request.user
    with transaction.atomic():
        device = (
            TOTPDevice.objects.select_for_update()
            .filter(user=user, confirmed=False)
            .order_by("pk")
            .first()
        )
        if device is None or not device.verify_token(code):
            return False
        device.confirmed = True
        device.save(update_fields=["confirmed"])
    otp_login(request, device)
    return True


def session_verify(request: HttpRequest, *, code: str) -> bool:
    """A logged-in session that was never verified (opened before the device, or before
    two-factor became required): a code from the user's device verifies it."""
    device = confirmed_device(request.user)
    if device is None or verify_token(request.user, device.persistent_id, code) is None:
        return False
    otp_login(request, device)
    return True
