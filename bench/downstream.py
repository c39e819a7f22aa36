"""The no-op downstream the benchmark's tools point at: every POST answers `{"ok": true}`.

Two implementations, so the faster can be picked by measurement (`run.py --downstream`):

- `stdlib`: `http.server.ThreadingHTTPServer`, HTTP/1.1 keep-alive, TCP_NODELAY on every
  accepted socket, the whole response written in one `sendall`;
- `asgi`: a raw ASGI app (`bench.downstream:app`) for uvicorn with uvloop + httptools.

    python bench/downstream.py --port 9100            # stdlib
    python -m uvicorn bench.downstream:app --port 9100 --loop uvloop --http httptools
"""

from __future__ import annotations

import argparse
import socket
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

BODY = b'{"ok": true}'
RESPONSE = (
    b"HTTP/1.1 200 OK\r\n"
    b"Content-Type: application/json\r\n"
    b"Content-Length: " + str(len(BODY)).encode() + b"\r\n"
    b"\r\n" + BODY
)


class NoopHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        self.wfile.write(RESPONSE)  # unbuffered: one sendall for status, headers and body

    do_POST = _answer
    do_GET = _answer
    do_PUT = _answer

    def log_message(self, format: str, *args: Any) -> None:
        pass


class NoopServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """The same answer as a raw ASGI app (run it with `--lifespan off`)."""
    if scope["type"] != "http":
        return
    more = True
    while more:
        message = await receive()
        more = message.get("more_body", False)
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(BODY)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": BODY})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9100)
    options = parser.parse_args()
    server = NoopServer((options.host, options.port), NoopHandler)
    try:
        server.serve_forever(poll_interval=0.5)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
