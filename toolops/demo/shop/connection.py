"""The shop's HTTP request handler: reads each request's body, plays out its fault plan
and answers JSON, keeping connections alive between requests.

Faults that lose a reply end the connection with a TCP reset and no answer at all, which
is what a client sees when a downstream dies after committing.
"""

from __future__ import annotations

import socket
import struct
import time
import traceback
from contextlib import suppress
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from toolops.demo.shop.faults import fault_reply
from toolops.demo.shop.handlers import ROUTES
from toolops.demo.shop.replies import (
    JSON,
    Invalid,
    Reply,
    body_object,
    dumps,
    invalid_reply,
    new_id,
    not_found,
    parse_json,
)

if TYPE_CHECKING:
    # Only the annotation of ShopHandler.server; server.py imports this module.
    from toolops.demo.shop.server import ShopServer

MAX_BODY_BYTES = 1024 * 1024
RECORDED_HEADERS = (
    "idempotency-key",
    "traceparent",
    "x-toolops-run-id",
    "x-toolops-tool-call-id",
    "x-toolops-attempt",
)


class BodyError(Exception):
    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status


class ShopHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive; every reply carries Content-Length
    server: ShopServer
    # Idle keep-alive connections are closed after this; clients reconnect transparently.
    timeout = 120
    request_id = ""

    def setup(self) -> None:
        super().setup()
        # Headers and body go out in two writes; without NODELAY the second waits for the
        # client's delayed ACK (~40 ms) on every keep-alive request.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def do_GET(self) -> None:
        self._dispatch()

    def do_POST(self) -> None:
        self._dispatch()

    do_PUT = do_PATCH = do_DELETE = do_POST

    def _dispatch(self) -> None:
        self.request_id = new_id("req")
        url = urlsplit(self.path)
        try:
            raw = self._read_body()
        except BodyError as exc:
            # The rest of the body is still on the wire, so this connection cannot be reused.
            self.close_connection = True
            error = "too_large" if exc.status == 413 else "invalid"
            self._send(Reply(exc.status, {"error": error, "detail": str(exc)}))
            return
        try:
            if url.path.startswith("/_shop/"):
                self._send(self.server.control(self.command, url.path, url.query, raw))
            else:
                self._business(url.path, raw)
        except Exception:
            traceback.print_exc()
            self.close_connection = True
            self._send(Reply(500, {"error": "internal", "detail": "unexpected shop error"}))

    def _business(self, path: str, raw: bytes) -> None:
        entry = self._log_arrival(path, raw)
        plan = self.server.plan_for(path)
        entry["fault"] = plan.fault
        if plan.latency_s and self._pause(plan.latency_s):
            return self._drop()
        if plan.status is not None:
            return self._send(fault_reply(plan), entry)
        if plan.hang_s is not None:
            self._pause(plan.hang_s)
            return self._drop()
        reply = self._execute(path, raw)
        if plan.hang_after_commit_s and self._pause(plan.hang_after_commit_s):
            return self._drop()
        if plan.drop_after_commit:
            return self._drop()
        if plan.status_after_commit is not None:
            reply = Reply(
                plan.status_after_commit, {"error": "injected_fault", "fault": plan.fault}
            )
        self._send(reply, entry)

    def _execute(self, path: str, raw: bytes) -> Reply:
        if path not in ROUTES:
            return not_found(f"no such endpoint: {path}")
        if self.command != "POST":
            return Reply(405, {"error": "method_not_allowed"}, {"Allow": "POST"})
        try:
            body = body_object(raw)
        except Invalid as exc:
            return invalid_reply(exc)
        return self.server.db.execute(path, body, self.headers.get("Idempotency-Key"))

    def _log_arrival(self, path: str, raw: bytes) -> JSON:
        try:
            body: Any = parse_json(raw) if raw.strip() else None
        except (UnicodeDecodeError, ValueError):
            body = raw.decode("utf-8", "replace")
        headers: JSON = dict.fromkeys(RECORDED_HEADERS)
        headers |= {name.lower(): value for name, value in self.headers.items()}
        entry: JSON = {
            "request_id": self.request_id,
            "method": self.command,
            "path": path,
            "body": body,
            "headers": headers,
            "at": time.time(),
            "status": None,
            "fault": None,
        }
        self.server.log_arrival(entry)
        return entry

    def _read_body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            return self._read_chunked()
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            raise BodyError(400, "Content-Length is not a number") from None
        if length < 0:
            raise BodyError(400, "Content-Length is negative")
        if length > MAX_BODY_BYTES:
            raise BodyError(413, "request body over 1 MiB")
        return self.rfile.read(length)

    def _read_chunked(self) -> bytes:
        chunks: list[bytes] = []
        total = 0
        while True:
            line = self.rfile.readline(1024)
            try:
                size = int(line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                raise BodyError(400, "malformed chunked body") from None
            if size == 0:
                break
            total += size
            if total > MAX_BODY_BYTES:
                raise BodyError(413, "request body over 1 MiB")
            chunks.append(self.rfile.read(size))
            self.rfile.readline(8)  # the CRLF after each chunk
        while self.rfile.readline(8192).strip():  # trailers, up to the blank line
            pass
        return b"".join(chunks)

    def _pause(self, seconds: float) -> bool:
        """Sleep for a fault; True when the server is shutting down meanwhile."""
        return self.server.closing.wait(seconds)

    def _drop(self) -> None:
        """End the connection with a TCP reset and no response at all."""
        self.close_connection = True
        with suppress(OSError):
            # Linger 0 turns close() into an RST: the client's read fails at once with a
            # connection reset instead of waiting for a response that never comes.
            linger = struct.pack("ii", 1, 0)
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, linger)
        # rfile holds a reference on the socket; the fd only really closes once it is closed.
        # wfile stays open: handle_one_request flushes it after we return.
        with suppress(OSError):
            self.rfile.close()
        with suppress(OSError):
            self.connection.close()

    def _send(self, reply: Reply, entry: JSON | None = None) -> None:
        if entry is not None:
            entry["status"] = reply.status
        payload = dumps(reply.body)
        try:
            self.send_response(reply.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.send_header("X-Request-Id", self.request_id or new_id("req"))
            for name, value in reply.headers.items():
                self.send_header(name, value)
            if self.close_connection:
                self.send_header("Connection", "close")
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(payload)
        except OSError:
            self.close_connection = True

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        # http.server answers malformed requests with an HTML page; keep every answer JSON.
        self.close_connection = True
        self.request_id = new_id("req")
        detail = message or self.responses.get(code, ("error",))[0]
        self._send(
            Reply(code, {"error": "bad_request" if code < 500 else "error", "detail": detail})
        )

    def log_message(self, format: str, *args: Any) -> None:
        if self.server.verbose:
            super().log_message(format, *args)
