"""The webhook channel: one JSON POST per webhook (each group's from the environment, and
those added in the console: toolops/notify/hooks.py), in the shape chat tools accept (Slack
and Mattermost incoming webhooks read `text` and `attachments[].fields`), with the
events also as plain data under `events` for anything else. Values in the chat part are
escaped for both receivers' markup (toolops/notify/clean.py): an arg cannot ping the
channel or dress a link as ours.

Signed: `X-ToolOps-Timestamp` (Unix seconds) and `X-ToolOps-Signature: sha256=<hex>`,
the HMAC-SHA256 of "<timestamp>.<raw body>" under the webhook's secret; a receiver that
checks the signature and refuses old timestamps cannot be fed forged or replayed
messages (docs/notifications.md shows the check)."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from toolops.notify import hooks
from toolops.notify.clean import chat
from toolops.notify.content import how_many
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
    text = lines[0] if len(lines) == 1 else f"{how_many(events)}:\n" + "\n".join(lines)
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
    """One message listing `events` to the webhook `group` names: a group's environment
    webhook ("operators") or a console one ("operators#7", toolops/notify/hooks.py)."""
    url, secret = hooks.resolve(group)
    post(url=url, secret=secret, raw=json_body(events), message_id=message_id)


def json_body(events: Sequence[NotificationEvent]) -> bytes:
    """The bytes POSTed, and signed, for `events`."""
    return json.dumps(payload(events), ensure_ascii=False).encode()


@dataclass(frozen=True)
class Answer:
    status: int
    ms: float


def post(*, url: str, secret: str, raw: bytes, message_id: str) -> Answer:
    """POST `raw`, signed with `secret`; the receiver's answer, or SendFailed saying in
    a sentence why it did not take it (no answer, no connection, an error status)."""
    timestamp = str(int(time.time()))
    headers = {
        "Content-Type": "application/json",
        "User-Agent": "ToolOps-Notifications",
        "X-ToolOps-Timestamp": timestamp,
        "X-ToolOps-Signature": signature(secret, timestamp, raw),
        "X-ToolOps-Delivery": message_id,
    }
    host = httpx.URL(url).host
    started = time.monotonic()
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
    return Answer(response.status_code, (time.monotonic() - started) * 1000)
