"""Real receivers for notification tests: an SMTP server (aiosmtpd) that keeps every
message, and an HTTP webhook receiver (http.server in a thread) that checks each
request's signature as a chat tool's receiver would, and can be told to fail."""

from __future__ import annotations

import email
import email.policy
import hashlib
import hmac
import json
import threading
import time
from dataclasses import dataclass, field
from email.message import EmailMessage as Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from aiosmtpd.controller import Controller

from tests.conftest import free_port

SECRET = "reviewers-webhook-secret-0123456789"
MAX_AGE_S = 300


class _Keep:
    def __init__(self) -> None:
        self.messages: list[Message] = []

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # noqa: N802
        message = email.message_from_bytes(envelope.original_content, policy=email.policy.default)
        message["X-Envelope-To"] = ",".join(envelope.rcpt_tos)
        message["X-Received-At"] = f"{time.monotonic():.3f}"
        self.messages.append(message)
        return "250 OK"


class SmtpServer:
    """A real SMTP server on a free port; `.messages` as received."""

    def __init__(self) -> None:
        self.port = free_port()
        self._keep = _Keep()
        self._controller = Controller(self._keep, hostname="127.0.0.1", port=self.port)
        self._controller.start()

    @property
    def messages(self) -> list[Message]:
        return list(self._keep.messages)

    def to(self, address: str) -> list[Message]:
        return [m for m in self.messages if address in m["X-Envelope-To"]]

    def env(self) -> dict[str, str]:
        return {
            "EMAIL_BACKEND": "django.core.mail.backends.smtp.EmailBackend",
            "EMAIL_HOST": "127.0.0.1",
            "EMAIL_PORT": str(self.port),
        }

    def stop(self) -> None:
        self._controller.stop()


def verified(secret: str, headers: Any, raw: bytes) -> bool:
    """The check docs/notifications.md shows a receiver: signature over "<ts>.<body>",
    compared in constant time, and the timestamp recent."""
    timestamp = headers.get("X-ToolOps-Timestamp", "")
    signature = headers.get("X-ToolOps-Signature", "")
    expected = hmac.new(secret.encode(), timestamp.encode() + b"." + raw, hashlib.sha256)
    fresh = timestamp.isdigit() and abs(time.time() - int(timestamp)) <= MAX_AGE_S
    return fresh and hmac.compare_digest(signature, "sha256=" + expected.hexdigest())


@dataclass
class Hook:
    raw: bytes
    body: dict[str, Any]
    signed: bool
    at: float


@dataclass
class WebhookReceiver:
    """POSTs to `url` are kept with whether their signature checked out; `fail_with`
    answers every request with that status instead of 200."""

    secret: str = SECRET
    fail_with: int | None = None
    hooks: list[Hook] = field(default_factory=list)
    tries: int = 0

    def __post_init__(self) -> None:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                receiver.tries += 1
                if receiver.fail_with:
                    self.send_response(receiver.fail_with)
                    self.end_headers()
                    return
                signed = verified(receiver.secret, self.headers, raw)
                receiver.hooks.append(Hook(raw, json.loads(raw), signed, time.monotonic()))
                self.send_response(200 if signed else 401)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks/reviewers"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def env(self, group: str = "reviewers") -> dict[str, str]:
        return {
            f"TOOLOPS_WEBHOOK_{group.upper()}_URL": self.url,
            f"TOOLOPS_WEBHOOK_{group.upper()}_SECRET": self.secret,
        }

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
