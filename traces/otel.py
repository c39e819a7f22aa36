"""OpenTelemetry for ToolOps, configured only by the standard variables.

Export is on when they ask for it: `OTEL_TRACES_EXPORTER` names an exporter (`otlp`,
`console`; `none` turns it off), or, with that unset, an OTLP endpoint is given
(`OTEL_EXPORTER_OTLP_ENDPOINT` / `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`). Otherwise nothing
is set up: no exporter retrying a collector that is not there, and no instrumentation
cost. `OTEL_SDK_DISABLED=true` wins over everything.

OTLP speaks `http/protobuf` (the default) or `grpc`, after
`OTEL_EXPORTER_OTLP_TRACES_PROTOCOL` / `OTEL_EXPORTER_OTLP_PROTOCOL`; the exporters read
their own endpoint, headers and timeout variables, and the batch processor its
`OTEL_BSP_*` ones. Spans leave through a BatchSpanProcessor: a queue and a background
thread, so a request only appends to a queue.

ToolOps' own spans (a call and its attempts) are built from the rows it stores, with the
ids it already sent downstream in `traceparent` (spans.py); Django, Celery and urllib3
are instrumented through the same tracer provider. The executor's own requests are kept
out of the urllib3 instrumentation (transport.py): the attempt span is their client span,
and a second one would double it and overwrite the `traceparent` it names.

A call's idempotency key is a plain SHA-256 of its run, step, tool and canonical args:
whoever reads the collector could confirm a guess at the args with it, a redacted value
included. So a span carries `toolops.idempotency_key_hmac` instead, an HMAC-SHA256 of
the key under a server key (`key_hmac`), which still joins the spans of one key (a
call, its replays, a retried request), and carries none when the call's args had
anything redacted: a leaked server key must not turn years of stored spans into an
oracle for redacted values."""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

import toolops

log = logging.getLogger(__name__)

DEFAULT_SERVICE_NAME = "toolops"
PROTOCOLS = ("http/protobuf", "grpc")
# Domain separation: the span key derived from SECRET_KEY is unrelated to every other
# use of it (sessions, CSRF, signing), and a TOOLOPS_SPAN_KEY reused elsewhere is too.
SPAN_KEY_LABEL = b"toolops/span-idempotency-key/v1"

_processors: list[Any] = []
_provider: Any = None
_resource: Any = None
_scope: Any = None


def exporter_names(env: dict[str, str] | os._Environ[str] = os.environ) -> list[str]:
    """The exporters the standard variables ask for; [] when export is off."""
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return []
    raw = env.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if not raw:
        endpoint = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or env.get(
            "OTEL_EXPORTER_OTLP_ENDPOINT"
        )
        return ["otlp"] if endpoint else []
    names = [n.strip() for n in raw.split(",") if n.strip()]
    if "none" in names:
        return []
    unknown = [n for n in names if n not in ("otlp", "console")]
    if unknown:
        raise ImproperlyConfigured(
            f"OTEL_TRACES_EXPORTER: unknown exporter {', '.join(unknown)!s}; "
            "ToolOps exports with otlp or console (or none)"
        )
    return names


def protocol(env: dict[str, str] | os._Environ[str] = os.environ) -> str:
    value = (
        env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        or env.get("OTEL_EXPORTER_OTLP_PROTOCOL")
        or "http/protobuf"
    ).strip()
    if value not in PROTOCOLS:
        raise ImproperlyConfigured(
            f"OTEL_EXPORTER_OTLP_PROTOCOL: {value!r} is not supported; use http/protobuf or grpc"
        )
    return value


def _exporter(name: str) -> Any:
    # The exporters load only here, when the environment asks for export: most processes
    # never import them (the gRPC one pulls in grpcio).
    if name == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter  # noqa: PLC0415

        return ConsoleSpanExporter()
    if protocol() == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc import trace_exporter as grpc  # noqa: PLC0415

        return grpc.OTLPSpanExporter()
    from opentelemetry.exporter.otlp.proto.http import trace_exporter as http  # noqa: PLC0415

    return http.OTLPSpanExporter()


def setup(*, exporters: Sequence[Any] | None = None, instrument: bool = True) -> bool:
    """Set up export once per process, from the environment (or with `exporters`, given
    by tests). True when spans are exported."""
    global _provider, _resource, _scope
    if _provider is not None:
        return bool(_processors)
    if exporters is None:
        names = exporter_names()
        if not names:
            return False
        exporters = [_exporter(name) for name in names]
    # The SDK loads only once export is on: a process that exports nothing never imports it.
    from opentelemetry import trace  # noqa: PLC0415
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource  # noqa: PLC0415
    from opentelemetry.sdk.trace import TracerProvider  # noqa: PLC0415
    from opentelemetry.sdk.trace.export import BatchSpanProcessor  # noqa: PLC0415
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope  # noqa: PLC0415

    resource = Resource.create()
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        # OTEL_SERVICE_NAME (read by Resource.create) wins when set.
        resource = resource.merge(Resource({SERVICE_NAME: DEFAULT_SERVICE_NAME}))
    provider = TracerProvider(resource=resource)
    for exporter in exporters:
        processor = BatchSpanProcessor(exporter)
        provider.add_span_processor(processor)
        _processors.append(processor)
    trace.set_tracer_provider(provider)
    _provider, _resource = provider, resource
    _scope = InstrumentationScope("toolops", getattr(toolops, "__version__", "") or None)
    if instrument:
        _instrument()
    return True


def _instrument() -> None:
    # Django's middleware is added to settings.MIDDLEWARE, so this must run before the
    # first handler loads it (AppConfig.ready does). The executor API's handler keeps its
    # own short chain: its request is the call span, not a second server span. The
    # instrumentations load only when export is on (setup), like the SDK.
    from opentelemetry.instrumentation.celery import CeleryInstrumentor  # noqa: PLC0415
    from opentelemetry.instrumentation.django import DjangoInstrumentor  # noqa: PLC0415
    from opentelemetry.instrumentation.urllib3 import URLLib3Instrumentor  # noqa: PLC0415

    # OTEL_PYTHON_DISABLED_INSTRUMENTATIONS names those to leave off, as for the
    # opentelemetry-instrument launcher ("django,celery,urllib3").
    off = {
        name.strip()
        for name in os.environ.get("OTEL_PYTHON_DISABLED_INSTRUMENTATIONS", "").split(",")
    }
    instrumentors = {
        "django": DjangoInstrumentor,
        "celery": CeleryInstrumentor,
        "urllib3": URLLib3Instrumentor,
    }
    hooks: dict[str, dict[str, Any]] = {"django": {"request_hook": _without_query}}
    for name, kind in instrumentors.items():
        instrumentor = kind()
        if name not in off and not instrumentor.is_instrumented_by_opentelemetry:
            instrumentor.instrument(tracer_provider=_provider, **hooks.get(name, {}))


# The URL attributes of a server span that hold the query string.
_URL_WITH_QUERY = ("http.target", "http.url", "url.full")


def _without_query(span: Any, request: Any) -> None:
    """A console page's span keeps its path, never its query: a search names what a person
    looked for (an idempotency key, a customer's e-mail address), and a reader of the
    collector must not learn it there either."""
    if not request.META.get("QUERY_STRING") or not span.is_recording():
        return
    attributes = getattr(span, "attributes", None) or {}
    for name in _URL_WITH_QUERY:
        value = attributes.get(name)
        if isinstance(value, str) and "?" in value:
            span.set_attribute(name, value.partition("?")[0])
    if attributes.get("url.query"):
        span.set_attribute("url.query", "")


def exporting() -> bool:
    return bool(_processors)


def resource() -> Any:
    return _resource


def scope() -> Any:
    return _scope


def emit(spans: Sequence[Any]) -> None:
    """Hand finished spans to the batch processors: a queue append, no I/O here."""
    for processor in _processors:
        for span in spans:
            processor.on_end(span)


def flush(timeout_ms: int = 5000) -> bool:
    return all(p.force_flush(timeout_ms) for p in _processors)


def reset_for_tests() -> None:
    """Forget the set-up (tests that install an in-memory exporter), the process-wide
    tracer provider included: left in place, it would trace what later tests do in this
    process — an MCP client, say, would put its own traceparent in every `_meta`. OTel's
    API sets the provider once per process; this undoes it as OpenTelemetry's own test
    utilities do (`reset_trace_globals`)."""
    global _provider, _resource, _scope
    # Tests only: a process that exports nothing never imports OpenTelemetry at all.
    from opentelemetry import trace  # noqa: PLC0415
    from opentelemetry.util._once import Once  # noqa: PLC0415

    for processor in _processors:
        processor.shutdown()
    _processors.clear()
    _provider = _resource = _scope = None
    trace._TRACER_PROVIDER_SET_ONCE = Once()
    trace._TRACER_PROVIDER = None


@lru_cache(maxsize=4)
def _span_key(secret: str) -> bytes:
    # One HMAC under the secret with a fixed label is a KDF in its own right (HKDF's
    # expand step with one block; NIST SP 800-108): the secret is already a random key,
    # so HKDF's extract step would add nothing, and this needs nothing beyond hmac.
    return hmac.new(secret.encode(), SPAN_KEY_LABEL, hashlib.sha256).digest()


def key_hmac(key: str) -> str:
    """What a span says of an idempotency key: HMAC-SHA256 of it under TOOLOPS_SPAN_KEY
    (or, unset, DJANGO_SECRET_KEY), each derived under SPAN_KEY_LABEL. The same key
    gives the same value in every process that shares the setting."""
    secret = settings.TOOLOPS_SPAN_KEY or settings.SECRET_KEY
    return hmac.new(_span_key(secret), key.encode(), hashlib.sha256).hexdigest()
