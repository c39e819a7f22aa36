"""A local OTLP/HTTP trace receiver for the benchmark: accepts `POST /v1/traces`, counts
the spans, and answers `GET /count` with how many it has received. Run as
`python bench/otlp_sink.py --port N`."""

from __future__ import annotations

import argparse
import gzip
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

received = {"spans": 0, "requests": 0}
lock = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        request = trace_service_pb2.ExportTraceServiceRequest()
        request.ParseFromString(body)
        count = sum(len(scope.spans) for rs in request.resource_spans for scope in rs.scope_spans)
        with lock:
            received["spans"] += count
            received["requests"] += 1
        self._reply(b"", "application/x-protobuf")

    def do_GET(self) -> None:  # noqa: N802
        with lock:
            data = json.dumps(received).encode()
        self._reply(data, "application/json")

    def _reply(self, data: bytes, kind: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    options = parser.parse_args()
    ThreadingHTTPServer((options.host, options.port), Handler).serve_forever()


if __name__ == "__main__":
    main()
