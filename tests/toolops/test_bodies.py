"""toolops.bodies.BodyLimit as ASGI middleware, driven directly: on every method a body
past the cap, or one that does not arrive in time, is refused and the application behind
it is never called; a body within both reaches it whole, as one message."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from toolops.bodies import BodyLimit

LIMIT = 1024
METHODS = ["GET", "HEAD", "OPTIONS", "POST", "PUT", "PATCH", "DELETE"]


class App:
    """Records what reached it."""

    def __init__(self) -> None:
        self.calls: list[tuple[dict[str, Any], dict[str, Any]]] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        self.calls.append((scope, await receive()))
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})


def serve(
    method: str,
    messages: list[dict[str, Any]],
    headers: list[tuple[bytes, bytes]],
    *,
    timeout_s: float = 5.0,
    stall: bool = False,
) -> tuple[App, list[dict[str, Any]]]:
    """One request through BodyLimit; `stall`: after `messages`, the client sends nothing."""
    app, sent = App(), []
    queue = list(messages)

    async def receive() -> dict[str, Any]:
        if queue:
            return queue.pop(0)
        if stall:
            await asyncio.Event().wait()  # never set: a client that stopped sending
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "method": method, "path": "/api/v1/runs", "headers": headers}
    asyncio.run(BodyLimit(app, limit=LIMIT, timeout_s=timeout_s)(scope, receive, send))
    return app, sent


def body(data: bytes, more: bool = False) -> dict[str, Any]:
    return {"type": "http.request", "body": data, "more_body": more}


def refused(sent: list[dict[str, Any]], status: int) -> dict[str, Any]:
    start, end = sent
    assert start["status"] == status
    assert (b"connection", b"close") in start["headers"]
    assert (b"content-type", b"application/problem+json") in start["headers"]
    problem = json.loads(end["body"])
    assert problem["status"] == status and problem["title"] and problem["detail"]
    return problem


@pytest.mark.parametrize("method", METHODS)
def test_it_refuses_a_declared_length_past_the_cap_on_every_method(method: str) -> None:
    app, sent = serve(method, [body(b"x" * 10)], [(b"content-length", b"1025")])

    assert "1 MiB" in refused(sent, 413)["detail"]
    assert app.calls == []


@pytest.mark.parametrize("method", METHODS)
def test_it_refuses_a_chunked_body_past_the_cap_on_every_method(method: str) -> None:
    chunks = [body(b"x" * 600, more=True), body(b"x" * 600, more=True), body(b"", more=False)]

    app, sent = serve(method, chunks, [(b"transfer-encoding", b"chunked")])

    refused(sent, 413)
    assert app.calls == []


@pytest.mark.parametrize("value", [b"-1", b"12x", b"", b"1e3"])
def test_it_refuses_a_content_length_that_is_not_a_number(value: bytes) -> None:
    app, sent = serve("POST", [body(b"")], [(b"content-length", value)])

    refused(sent, 413)
    assert app.calls == []


def test_it_hands_on_a_chunked_body_whole_with_its_length() -> None:
    chunks = [body(b'{"a":', more=True), body(b"1}", more=True), body(b"")]

    app, sent = serve("GET", chunks, [(b"transfer-encoding", b"chunked")])

    [(scope, message)] = app.calls
    assert message == body(b'{"a":1}')
    assert (b"content-length", b"7") in scope["headers"]
    assert all(name != b"transfer-encoding" for name, _ in scope["headers"])
    assert sent[0]["status"] == 200


def test_it_hands_on_a_body_of_exactly_the_cap() -> None:
    app, _ = serve("POST", [body(b"x" * LIMIT)], [(b"content-length", b"1024")])

    assert app.calls[0][1] == body(b"x" * LIMIT)


def test_it_leaves_a_request_without_a_body_as_it_came() -> None:
    headers = [(b"host", b"testserver")]

    app, _ = serve("GET", [body(b"")], headers)

    [(scope, message)] = app.calls
    assert scope["headers"] == headers
    assert message == body(b"")


def test_it_answers_408_when_the_body_stops_arriving() -> None:
    headers = [(b"content-length", b"100")]

    app, sent = serve("POST", [body(b"x" * 10, more=True)], headers, timeout_s=0.05, stall=True)

    assert "did not arrive within 0.05 s" in refused(sent, 408)["detail"]
    assert app.calls == []


def test_it_calls_nothing_when_the_client_leaves_mid_body() -> None:
    app, sent = serve("POST", [body(b"x", more=True)], [(b"transfer-encoding", b"chunked")])

    assert app.calls == [] and sent == []


def test_it_passes_other_scopes_through() -> None:
    seen: list[str] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        seen.append(scope["type"])

    limit = BodyLimit(app, limit=LIMIT, timeout_s=1)
    for kind in ("websocket", "lifespan"):
        asyncio.run(limit({"type": kind}, None, None))

    assert seen == ["websocket", "lifespan"]


def test_it_cuts_every_stalled_read_and_serves_the_others() -> None:
    app, sent = App(), {}
    limit = BodyLimit(app, limit=LIMIT, timeout_s=0.05)

    async def one(n: int, stall: bool) -> None:
        messages = [body(b"x", more=stall)]

        async def receive() -> dict[str, Any]:
            if messages:
                return messages.pop(0)
            await asyncio.Event().wait()
            raise AssertionError("unreachable")

        async def send(message: dict[str, Any]) -> None:
            sent.setdefault(n, []).append(message)

        scope = {"type": "http", "method": "POST", "headers": [(b"transfer-encoding", b"x")]}
        await limit(scope, receive, send)

    async def main() -> None:
        await asyncio.gather(*(one(n, stall=n % 2 == 0) for n in range(6)))

    asyncio.run(main())

    assert {n: m[0]["status"] for n, m in sent.items()} == {
        0: 408,
        1: 200,
        2: 408,
        3: 200,
        4: 408,
        5: 200,
    }
    assert len(app.calls) == 3 and limit.deadlines.reading == {}


def test_it_lets_a_cancellation_from_elsewhere_through() -> None:
    limit = BodyLimit(App(), limit=LIMIT, timeout_s=60)

    async def main() -> None:
        waiting = asyncio.Event()

        async def receive() -> dict[str, Any]:
            waiting.set()
            await asyncio.Event().wait()
            raise AssertionError("unreachable")

        scope = {"type": "http", "method": "POST", "headers": []}
        task = asyncio.create_task(limit(scope, receive, None))
        await waiting.wait()
        task.cancel()  # e.g. the server shutting down
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert limit.deadlines.reading == {}
