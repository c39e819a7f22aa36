"""The ASGI plumbing the bench's bare apps share (bench/physical.py, bench/dbos_peer.py):
the whole body read, a readiness answer to anything but a POST, the path checked, and a
JSON answer sent. What each app does with a call is its own `Handler`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

# (run id from the path, the request's body) -> (status, JSON body)
Handler = Callable[[str, bytes], Awaitable[tuple[int, bytes]]]
App = Callable[[dict[str, Any], Any, Any], Awaitable[None]]

READY = b'{"ok": true}'
NOT_FOUND = b'{"message": "not found"}'


def post_app(prefix: bytes, suffix: bytes, handle: Handler) -> App:
    """An ASGI app answering `POST {prefix}{run}{suffix}` with `handle(run, body)`."""

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = await read_body(receive)
        if scope["method"] != "POST":
            await answer(send, 200, READY)  # readiness: the bench waits for any answer
            return
        path: bytes = scope.get("raw_path") or scope["path"].encode()
        if not (path.startswith(prefix) and path.endswith(suffix)):
            await answer(send, 404, NOT_FOUND)
            return
        status, out = await handle(path[len(prefix) : -len(suffix)].decode(), body)
        await answer(send, status, out)

    return app


async def read_body(receive: Any) -> bytes:
    chunks = []
    more = True
    while more:
        message = await receive()
        chunks.append(message.get("body", b""))
        more = message.get("more_body", False)
    return b"".join(chunks)


async def answer(send: Any, status: int, body: bytes) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
