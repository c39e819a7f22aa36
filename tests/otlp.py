"""A real OTLP trace receiver for the tests, started in-process like the shop: OTLP/HTTP
(protobuf, `POST /v1/traces`) and, when asked, OTLP/gRPC. It keeps every span it was
sent, decoded to plain dicts."""

from __future__ import annotations

import gzip
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

from tests.waiting import wait_until

Span = dict[str, Any]


def _value(v: Any) -> Any:
    kind = v.WhichOneof("value")
    return getattr(v, kind) if kind else None


def decode(request: Any) -> list[Span]:
    spans: list[Span] = []
    for resource_spans in request.resource_spans:
        resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
        for scope_spans in resource_spans.scope_spans:
            for s in scope_spans.spans:
                spans.append(
                    {
                        "name": s.name,
                        "trace_id": s.trace_id.hex(),
                        "span_id": s.span_id.hex(),
                        "parent_span_id": s.parent_span_id.hex(),
                        "kind": s.kind,  # 1 internal, 2 server, 3 client
                        "attributes": {a.key: _value(a.value) for a in s.attributes},
                        "status": s.status.code,  # 0 unset, 1 ok, 2 error
                        "links": [(ln.trace_id.hex(), ln.span_id.hex()) for ln in s.links],
                        "start": s.start_time_unix_nano,
                        "end": s.end_time_unix_nano,
                        "resource": resource,
                        "scope": scope_spans.scope.name,
                    }
                )
    return spans


class Receiver:
    def __init__(self) -> None:
        self.spans: list[Span] = []
        self.lock = threading.Lock()
        self.url = ""

    def add(self, request: Any) -> None:
        with self.lock:
            self.spans.extend(decode(request))

    def clear(self) -> None:
        with self.lock:
            self.spans.clear()

    def wait_for(self, predicate: Callable[[list[Span]], bool], timeout: float = 15) -> list[Span]:
        """Wait until `predicate(spans)` holds; the spans then."""

        def matched() -> tuple[list[Span]] | None:
            with self.lock:
                spans = list(self.spans)
            return (spans,) if predicate(spans) else None

        def got() -> str:
            with self.lock:
                return f"spans never matched; got {[s['name'] for s in self.spans]}"

        (spans,) = wait_until(matched, timeout, failure=got)
        return spans

    def toolops(self) -> list[Span]:
        """The spans ToolOps itself made (not the Django/Celery/urllib3 instrumentation)."""
        with self.lock:
            return [s for s in self.spans if s["scope"] == "toolops"]


def _http_handler(receiver: Receiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            if self.path != "/v1/traces":
                self.send_response(404)
                self.end_headers()
                return
            request = trace_service_pb2.ExportTraceServiceRequest()
            request.ParseFromString(body)
            receiver.add(request)
            out = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

        def log_message(self, *args: Any) -> None:
            pass

    return Handler


@pytest.fixture
def otlp_http() -> Iterator[Receiver]:
    """An OTLP/HTTP receiver; its `url` is the OTEL_EXPORTER_OTLP_ENDPOINT to give."""
    receiver = Receiver()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _http_handler(receiver))
    receiver.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield receiver
    server.shutdown()
    server.server_close()


@pytest.fixture
def otlp_grpc() -> Iterator[Receiver]:
    """An OTLP/gRPC receiver."""
    from concurrent import futures

    import grpc
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc

    receiver = Receiver()

    class Service(trace_service_pb2_grpc.TraceServiceServicer):
        def Export(self, request: Any, context: Any) -> Any:  # noqa: N802 - gRPC's name
            receiver.add(request)
            return trace_service_pb2.ExportTraceServiceResponse()

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Service(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    receiver.url = f"http://127.0.0.1:{port}"
    yield receiver
    server.stop(0)
