"""Settings: notifications (docs/notifications.md) — mail through Django's own names, each
group's webhook, how messages are folded and retried."""

from __future__ import annotations

import os

from django.core.exceptions import ImproperlyConfigured

from toolops.envs import envbool, envfloat, envint

# Notifications (docs/notifications.md): e-mail through Django's mail settings, read from
# the environment under Django's own names; each group's webhook from
# TOOLOPS_WEBHOOK_<GROUP>_URL and _SECRET (the HMAC key of its signature header).
EMAIL_BACKEND = os.getenv("EMAIL_BACKEND", "django.core.mail.backends.smtp.EmailBackend")
EMAIL_HOST = os.getenv("EMAIL_HOST", "localhost")
EMAIL_PORT = envint("EMAIL_PORT", 25)
EMAIL_HOST_USER = os.getenv("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = os.getenv("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = envbool("EMAIL_USE_TLS", "0")
EMAIL_USE_SSL = envbool("EMAIL_USE_SSL", "0")
EMAIL_TIMEOUT = envfloat("EMAIL_TIMEOUT", 10.0)
DEFAULT_FROM_EMAIL = os.getenv("DEFAULT_FROM_EMAIL", "ToolOps <toolops@localhost>")
# Links in messages start with this (the console as people reach it).
TOOLOPS_PUBLIC_URL = os.getenv("TOOLOPS_PUBLIC_URL", "http://localhost:8000")
# The groups a webhook may serve, and the shortest secret taken: the same for the
# environment's webhooks and those added in the console (toolops/notify/hooks.py).
TOOLOPS_WEBHOOK_GROUPS = ("reviewers", "support", "operators")
TOOLOPS_WEBHOOK_SECRET_MIN = 16
TOOLOPS_WEBHOOKS: dict[str, tuple[str, str]] = {}
for _group in TOOLOPS_WEBHOOK_GROUPS:
    _url = os.getenv(f"TOOLOPS_WEBHOOK_{_group.upper()}_URL", "").strip()
    _secret = os.getenv(f"TOOLOPS_WEBHOOK_{_group.upper()}_SECRET", "").strip()
    if _url and not _url.startswith(("http://", "https://")):
        raise ImproperlyConfigured(f"TOOLOPS_WEBHOOK_{_group.upper()}_URL must be an http(s) URL")
    if _url and len(_secret) < TOOLOPS_WEBHOOK_SECRET_MIN:
        raise ImproperlyConfigured(
            f"TOOLOPS_WEBHOOK_{_group.upper()}_SECRET must be set (16 characters or more) "
            "when its URL is: receivers check the signature with it"
        )
    if _url:
        TOOLOPS_WEBHOOKS[_group] = (_url, _secret)
# Events for one recipient within this many seconds go out as one message.
TOOLOPS_NOTIFY_WINDOW_S = envfloat("TOOLOPS_NOTIFY_WINDOW_S", 5.0)
# A failed send is tried again after base, 2×base, 4×base … (capped), at most this often.
TOOLOPS_NOTIFY_MAX_ATTEMPTS = envint("TOOLOPS_NOTIFY_MAX_ATTEMPTS", 6)
TOOLOPS_NOTIFY_RETRY_BASE_S = envfloat("TOOLOPS_NOTIFY_RETRY_BASE_S", 10.0)
TOOLOPS_NOTIFY_RETRY_CAP_S = envfloat("TOOLOPS_NOTIFY_RETRY_CAP_S", 600.0)
# A send not finished within this is taken for dead; work a lost message left behind is
# picked up by the sweep after the grace.
TOOLOPS_NOTIFY_LEASE_S = envfloat("TOOLOPS_NOTIFY_LEASE_S", 60.0)
TOOLOPS_NOTIFY_GRACE_S = envfloat("TOOLOPS_NOTIFY_GRACE_S", 30.0)
# Support is reminded of a ticket nobody took after this long.
TOOLOPS_NOTIFY_TICKET_UNASSIGNED_S = envfloat("TOOLOPS_NOTIFY_TICKET_UNASSIGNED_S", 1800.0)
if not (TOOLOPS_NOTIFY_MAX_ATTEMPTS or 0) >= 1 or not 0 <= TOOLOPS_NOTIFY_WINDOW_S <= 600:
    raise ImproperlyConfigured(
        "TOOLOPS_NOTIFY_MAX_ATTEMPTS must be at least 1 and TOOLOPS_NOTIFY_WINDOW_S 0 to 600"
    )
