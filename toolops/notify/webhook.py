"""The webhook channel: one JSON POST per group, in the shape chat tools accept (Slack
and Mattermost incoming webhooks read `text` and `attachments[].fields`), with the
events also as plain data under `events` for anything else. Values in the chat part are
escaped for both receivers' markup (toolops/notify/clean.py): an arg cannot ping the
channel or dress a link as ours.

Signed: `X-ToolOps-Timestamp` (Unix seconds) and `X-ToolOps-Signature: sha256=<hex>`,
the HMAC-SHA256 of "<timestamp>.<raw body>" under the group's secret; a receiver that
checks the signature and refuses old timestamps cannot be fed forged or replayed
messages (docs/notifications.md shows the check)."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import Sequence
from typing import Any

import httpx
from django.conf import settings

from toolops.notify.clean import chat
from toolops.notify.email import SendFailed
from toolops.notify.models import NotificationEvent

TIMEOUT_S = 5.0


def payload(events: Sequence[NotificationEvent]) -> dict[str, Any]:
    """The chat message (`text`, `attachments`) with every value the events carry made
    inert for Slack and Mattermost (clean.chat); our own link (`title_link`, and the
    bare link after each subject) is written as it is. `events` is the same as plain
    data, raw: a receiver that renders it escapes it for its own format."""
    # Plain text with bare links: Slack and Mattermost both link them (their link
    # syntaxes differ: Slack's <url|text>, Mattermost's Markdown).
    lines = [f"{chat(e.subject)} {e.link}" for e in events]
    text = lines[0] if len(lines) == 1 else f"{len(lines)} things need you:\n" + "\n".join(lines)
    return {
        "text": text,
        "attachments": [
            {
                "fallback": chat(event.subject),
                "title": chat(event.subject),
                "title_link": event.link,
                "text": chat(event.text),
                "fields": [
                    {"title": chat(k), "value": chat(v), "short": True} for k, v in event.fields
                ],
            }
            for event in events
        ],
        "events": [
            {
                "kind": event.kind,
                "key": event.key,
                "subject": event.subject,
                "text": event.text,
                "link": event.link,
                "fields": dict(event.fields),
                "created_at": event.created_at.isoformat(),
            }
            for event in events
        ],
    }


def signature(secret: str, timestamp: str, raw: bytes) -> str:
    digest = hmac.new(secret.encode(), timestamp.encode() + b"." + raw, hashlib.sha256)
    return f"sha256={digest.hexdigest()}"


def send(*, group: str, events: Sequence[NotificationEvent], message_id: str) -> None:
    if group not in settings.TOOLOPS_WEBHOOKS:  # taken out of the settings since queued
        raise SendFailed(
            f"No webhook is set for the group {group} "
            f"(TOOLOPS_WEBHOOK_{group.upper()}_URL); set it, then send again."
        )
    url, secret = settings.TOOLOPS_WEBHOOKS[group]
    raw = json.dumps(payload(events), ensure_ascii=False).encode()
    timestamp = str(int(time.time()))
    headers = {
        "Content-Type": "application/json",
        "User-Agent": "ToolOps-Notifications",
        "X-ToolOps-Timestamp": timestamp,
        "X-ToolOps-Signature": signature(secret, timestamp, raw),
        "X-ToolOps-Delivery": message_id,
    }
    host = httpx.URL(url).host
    try:
        response = httpx.post(url, content=raw, headers=headers, timeout=TIMEOUT_S)
    except httpx.TimeoutException:
        raise SendFailed(f"The webhook at {host} did not answer within {TIMEOUT_S:g} s.") from None
    except httpx.ConnectError:
        raise SendFailed(f"Could not connect to the webhook at {host}.") from None
    except httpx.HTTPError:
        raise SendFailed(f"The connection to the webhook at {host} broke off.") from None
    if not response.is_success:
        raise SendFailed(
            f"The webhook at {host} answered {response.status_code} "
            f"{response.reason_phrase or 'error'}."
        )
