"""A real downstream that answers with as many bytes as asked, streamed: the body is
never in its memory, so a test can measure ours."""

from __future__ import annotations

import gzip
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

MIB = 1024 * 1024
CHUNK = 64 * 1024


class Handler(BaseHTTPRequestHandler):
    """`?size=N` bytes of a JSON object, `&status=S`, `&framing=chunked|length|gzip`,
    `&cut=stall|drop` (the body stops part way)."""

    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        self._answer()

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        self._answer()

    def _answer(self) -> None:
        query = {k: v[0] for k, v in parse_qs(urlparse(self.path).query).items()}
        size, status = int(query.get("size", "2")), int(query.get("status", "200"))
        framing = query.get("framing", "chunked")
        self.server.requests += 1  # type: ignore[attr-defined]
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        try:
            if "cut" in query:  # half a body, then `stall` (until stopped) or `drop`
                self.send_header("Content-Length", str(size))
                self.end_headers()
                self.wfile.write(b'{"pad":"xxxx')
                self.wfile.flush()
                if query["cut"] == "stall":
                    self.server.stopping.wait()  # type: ignore[attr-defined]
                self.close_connection = True
                return
            if framing == "gzip":  # a small body that decodes into `size` bytes
                packed = gzip.compress(b"".join(_json(size)))
                self.send_header("Content-Encoding", "gzip")
                self.send_header("Content-Length", str(len(packed)))
                self.end_headers()
                self.wfile.write(packed)
            elif framing == "length":
                self.send_header("Content-Length", str(size))
                self.end_headers()
                for part in _json(size):
                    self.wfile.write(part)
            else:
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                for part in _json(size):
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
                self.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client stopped reading: as it should

    def log_message(self, *args: Any) -> None:
        pass


def _json(size: int) -> Iterator[bytes]:
    """`{"pad": "xxx…"}`, `size` bytes in all, in chunks."""
    head, tail = b'{"pad":"', b'"}'
    yield head
    left = size - len(head) - len(tail)
    while left > 0:
        yield b"x" * min(CHUNK, left)
        left -= CHUNK
    yield tail


class BigServer:
    def __init__(self) -> None:
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.httpd.requests = 0  # type: ignore[attr-defined]
        self.httpd.stopping = threading.Event()  # type: ignore[attr-defined]
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    @property
    def requests(self) -> int:
        return self.httpd.requests  # type: ignore[attr-defined,no-any-return]

    def stop(self) -> None:
        self.httpd.stopping.set()  # type: ignore[attr-defined]
        self.httpd.shutdown()
        self.httpd.server_close()


def big_tools(url: str) -> str:
    """Catalog TOML: a read and a write whose downstream answers `size` bytes."""
    return f"""
[[tool]]
name = "big_report"
kind = "read"
description = "A report as large as asked."
url = "{url}/report?size=52428800"
method = "POST"
timeout_s = 10.0
max_attempts = 3
params_schema = {{ type = "object" }}

[[tool]]
name = "big_import"
kind = "idempotent_write"
description = "An import whose receipt is as large as asked."
url = "{url}/import?size=52428800"
method = "POST"
timeout_s = 10.0
max_attempts = 3
params_schema = {{ type = "object" }}
"""
