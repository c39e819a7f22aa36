"""Receivers for the login events other code announces (Django's auth, axes)."""

from __future__ import annotations

import logging
import time
from typing import Any

from axes.signals import user_locked_out
from django.contrib.auth.signals import user_logged_in
from django.db import transaction
from django.dispatch import receiver

from toolops.accounts.middleware import TOUCHED_KEY
from toolops.audit.services import Action, Ref, audit_record

log = logging.getLogger(__name__)


@receiver(user_logged_in)
def on_logged_in(sender: Any, request: Any, user: Any, **kwargs: Any) -> None:
    # The idle clock starts at login; IdleSessionMiddleware moves it on from here.
    if request is not None and hasattr(request, "session"):
        request.session[TOUCHED_KEY] = int(time.time())


@receiver(user_locked_out)
def on_user_locked_out(
    sender: Any, request: Any, username: str | None, ip_address: str | None, **kwargs: Any
) -> None:
    # axes also sends this for every try refused while the lock holds; only the failure
    # that sets the lock has counted failures on the request.
    if getattr(request, "axes_failures_since_start", None) is None:
        return
    log.warning("login locked for %r from %s after repeated failures", username, ip_address)
    # axes has committed its own row by now: the entry gets a transaction of its own.
    with transaction.atomic():
        audit_record(
            actor=None,
            action=Action.LOGIN_LOCKOUT,
            obj=Ref("login", username or ""),
            detail={"username": username or "", "address": ip_address or ""},
            summary=f"Locked the login of {username} from {ip_address} after repeated failures",
            request=request,
        )
