"""Request bodies: capped and read within a deadline before any application sees them.

Every HTTP request — API, MCP and console alike, on every method (a GET's or a HEAD's
body counts too) — has its body read here, whole, into at most BODY_LIMIT_BYTES, and
handed on as one message. Nothing behind this (Django's request file, the MCP SDK) ever
holds a byte more, and nothing is stored or authenticated for a body that is refused.

The read has a deadline, TOOLOPS_BODY_READ_TIMEOUT_S from the end of the headers (the
whole body, not each chunk): a client that trickles its body gets 408 and its connection
is closed. uvicorn times out only idle keep-alive connections, between requests; a request
in progress may otherwise hold its connection, and this buffer, for ever."""

from __future__ import annotations

import asyncio
from typing import Any

from toolops.refusals import send_problem

Scope = dict[str, Any]
Message = dict[str, Any]


class BodyLimit:
    """The cap and the deadline, as ASGI middleware around the whole HTTP application.

    A chunked body (no Content-Length) is buffered up to the cap and handed on with its
    length, so Django and DRF see it like any other body."""

    def __init__(self, app: Any, *, limit: int, timeout_s: float) -> None:
        self.app = app
        self.limit = limit
        self.timeout_s = timeout_s
        self.deadlines = Deadlines(timeout_s)

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        declared, chunked = _framing(scope)
        if declared is not None and (not declared.isdigit() or int(declared) > self.limit):
            # Refused on its header alone: not a byte of it is read.
            return await _refuse(send, 413, "The request body is larger than 1 MiB.")
        task = self.deadlines.start()
        try:
            body = await _read(receive, self.limit)
        except asyncio.CancelledError:
            if not self.deadlines.expired(task):
                raise  # cancelled by someone else: the server is shutting down
            detail = f"The request body did not arrive within {self.timeout_s:g} s."
            return await _refuse(send, 408, detail)
        except TooLarge:
            return await _refuse(send, 413, "The request body is larger than 1 MiB.")
        finally:
            self.deadlines.stop(task)
        if body is None:  # the client went away mid-body
            return None
        if chunked or (declared is None and body):
            headers = [(k, v) for k, v in scope["headers"] if k != b"transfer-encoding"]
            headers.append((b"content-length", str(len(body)).encode()))
            scope = {**scope, "headers": headers}
        await self.app(scope, _replay(body, receive), send)


class Deadlines:
    """The body reads in progress and when each must end, checked by one timer a process.

    A timer per request (asyncio.timeout) costs ~13 µs, most of what this module costs a
    request, for a body that has nearly always arrived with its headers. Here a request
    costs a dict entry; a read past its deadline is cancelled at the next check, at most
    a quarter of the timeout (and never more than 1 s) late."""

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self.tick_s = min(1.0, timeout_s / 4)
        self.reading: dict[asyncio.Task[Any], float] = {}
        self.cancelled: set[asyncio.Task[Any]] = set()
        self.timer: asyncio.TimerHandle | None = None
        self.loop: asyncio.AbstractEventLoop | None = None

    def start(self) -> asyncio.Task[Any]:
        task = asyncio.current_task()
        assert task is not None
        loop = asyncio.get_running_loop()
        self.reading[task] = loop.time() + self.timeout_s
        if self.timer is None or self.loop is not loop:
            self.loop, self.timer = loop, loop.call_later(self.tick_s, self._check)
        return task

    def stop(self, task: asyncio.Task[Any]) -> None:
        self.reading.pop(task, None)

    def expired(self, task: asyncio.Task[Any]) -> bool:
        """Whether the task's cancellation was ours; if so, it is undone."""
        if task not in self.cancelled:
            return False
        self.cancelled.discard(task)
        task.uncancel()
        return True

    def _check(self) -> None:
        assert self.loop is not None
        now = self.loop.time()
        for task, deadline in list(self.reading.items()):
            if deadline <= now:
                # The task waits in _read's receive(): the cancellation lands there.
                del self.reading[task]
                self.cancelled.add(task)
                task.cancel()
        self.timer = self.loop.call_later(self.tick_s, self._check) if self.reading else None


class TooLarge(Exception):
    """The body went past the cap; the rest of it is never read."""


def _framing(scope: Scope) -> tuple[bytes | None, bool]:
    """The Content-Length as sent (None when absent), and whether the body is chunked."""
    declared, chunked = None, False
    for name, value in scope.get("headers") or ():
        if name == b"content-length":
            declared = value.strip()
        elif name == b"transfer-encoding":
            chunked = True
    return declared, chunked


async def _read(receive: Any, limit: int) -> bytes | None:
    """The whole body, or None on a disconnect; TooLarge past `limit`."""
    message = await receive()
    if message["type"] == "http.disconnect":
        return None
    body: bytes = message.get("body", b"")
    size = len(body)
    if size > limit:
        raise TooLarge
    if not message.get("more_body", False):  # the usual case: one message
        return body
    chunks = [body]
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise TooLarge
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def _replay(body: bytes, receive: Any) -> Any:
    """A `receive` that gives the body read here once, then whatever the server says next
    (a disconnect)."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


async def _refuse(send: Any, status: int, detail: str) -> None:
    """A problem body, and the connection closed: the rest of the body is never read, so
    the connection cannot carry another request."""
    await send_problem(send, status, detail, headers=[(b"connection", b"close")])
