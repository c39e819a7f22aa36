"""A downstream's response is JSON from outside like any other: past the bounds of
toolops.jsonbound it is an invalid body (a failed call with a reason), never a
RecursionError or a NaN stored into a row."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from toolops.tools import http
from toolops.tools.outcome import Failure

BODIES = {
    "/deep": b"[" * 5000 + b"]" * 5000,
    "/nan": b'{"total": NaN}',
    "/huge": b'{"total": 1e999}',
    "/ok": b'{"total": 1.5}',
}


class Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = BODIES[self.path]
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def downstream() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.mark.parametrize("path", ["/deep", "/nan", "/huge"])
def test_a_response_past_the_bounds_is_an_invalid_body(downstream: str, path: str) -> None:
    outcome = http.send(url=downstream + path, method="POST", body={}, headers={}, timeout_s=5)
    assert outcome.failure == Failure.INVALID_BODY


def test_a_response_within_the_bounds_is_its_json(downstream: str) -> None:
    outcome = http.send(url=downstream + "/ok", method="POST", body={}, headers={}, timeout_s=5)
    assert outcome.failure is None and outcome.body == {"total": 1.5}
