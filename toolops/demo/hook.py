"""The demo's webhook receiver: a small HTTP server in a thread of `manage.py demo`, on a
free local port, added in the console's store as the reviewers' and the operators'
webhook (as an operator would add it on /console/notifications/webhooks/), so that every
message ToolOps sends them shows up in the demo's terminal, one line each, with whether
its signature checked out:

    ↪ webhook reviewers ✓ signed: Approval waiting: Charge 89.00 EUR … http://…

It checks each POST as docs/notifications.md tells a receiver to: the HMAC-SHA256 of
"<timestamp>.<body>" under the webhook's secret, compared in constant time, and the
timestamp recent. The webhooks an earlier demo added (named DEMO_LABEL) are removed
first: their port is gone. Ctrl-C stops the receiver with the rest."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from toolops.notify.hook_admin import webhook_add, webhook_remove
from toolops.notify.models import Webhook

HOST = "127.0.0.1"
GROUPS = ("reviewers", "operators")
DEMO_LABEL = "the demo's receiver (make demo)"
MAX_AGE_S = 300
LINE_MAX = 160


def verified(secret: str, headers: Any, raw: bytes) -> bool:
    timestamp = headers.get("X-ToolOps-Timestamp", "")
    signature = headers.get("X-ToolOps-Signature", "")
    mac = hmac.new(secret.encode(), timestamp.encode() + b"." + raw, hashlib.sha256)
    fresh = timestamp.isdigit() and abs(time.time() - int(timestamp)) <= MAX_AGE_S
    return fresh and hmac.compare_digest(signature, "sha256=" + mac.hexdigest())


def one_line(raw: bytes) -> str:
    """The message's `text` on one line, cut to LINE_MAX."""
    try:
        text = str(json.loads(raw).get("text", ""))
    except (ValueError, AttributeError):
        text = "(not a JSON object)"
    text = " ".join(text.split())
    return text if len(text) <= LINE_MAX else text[: LINE_MAX - 1] + "…"


class DemoReceiver:
    """POSTs to /hooks/<group> are checked with that group's secret and said in one line."""

    def __init__(self, say: Callable[[str], None]) -> None:
        self.say = say
        self.secrets: dict[str, str] = {}
        self.received = 0
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                raw = self.rfile.read(int(self.headers.get("Content-Length", "0") or 0))
                status = receiver.heard(self.path, self.headers, raw)
                self.send_response(status)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass  # one line per message is said by `heard`

        self.server = ThreadingHTTPServer((HOST, 0), Handler)
        self.port = int(self.server.server_address[1])
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url_for(self, group: str) -> str:
        return f"http://{HOST}:{self.port}/hooks/{group}"

    def heard(self, path: str, headers: Any, raw: bytes) -> int:
        group = path.rstrip("/").rsplit("/", 1)[-1]
        secret = self.secrets.get(group)
        self.received += 1
        if secret is None:
            self.say(f"↪ webhook {group[:30]} ✗ not a webhook of the demo's: refused (404)")
            return 404
        if not verified(secret, headers, raw):
            self.say(f"↪ webhook {group} ✗ the signature does not check out: refused (401)")
            return 401
        self.say(f"↪ webhook {group} ✓ signed: {one_line(raw)}")
        return 200

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def receiver_start(say: Callable[[str], None]) -> DemoReceiver:
    """Start the receiver and make it the demo's webhook of each of GROUPS, in place of
    any an earlier demo added. Audited as ToolOps' own doing (no person)."""
    receiver = DemoReceiver(say)
    for old in Webhook.objects.filter(label=DEMO_LABEL):
        webhook_remove(hook=old, by=None)
    for group in GROUPS:
        added = webhook_add(
            group=group, url=receiver.url_for(group), secret=None, label=DEMO_LABEL, by=None
        )
        receiver.secrets[group] = added.secret
    return receiver


def receiver_stop(receiver: DemoReceiver | None) -> None:
    if receiver is not None:
        receiver.stop()


def banner_lines(web_url: str, mail: str, receiver: DemoReceiver | None) -> list[str]:
    """The banner's notification lines: the outbox, the e-mails and the receiver."""
    lines = [f"Notifications: {web_url}/console/notifications/ (as operator); e-mails {mail}"]
    if receiver is not None:
        lines.append(
            f"Webhooks: the demo's receiver at http://{HOST}:{receiver.port}/hooks/ is the "
            f"{' and '.join(GROUPS)} groups' webhook ({web_url}/console/notifications/webhooks/"
            "); each message it receives is printed here (↪), its signature checked"
        )
    return lines
