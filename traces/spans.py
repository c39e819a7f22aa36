"""A call and its attempts as OpenTelemetry spans (DESIGN.md "Tracing and metrics").

The rows are the stored spans: a ToolCall is the call span (`span_id`, in its run's
trace unless `trace_id` names a compensation's own), each Attempt a child span, its
`span_id` the parent id its downstream received in `traceparent`. Export builds the
same spans from the same rows, so the stored and the exported trace are one, with the
ids the downstream saw. Attribute names follow the GenAI conventions for tool execution
(`gen_ai.*`), the HTTP client conventions for attempts, and `toolops.*` for the rest.

No args, results or messages are exported: a span carries the args hash, an HMAC of the
idempotency key (otel.py), and the failure as `error.type` (the reason, a fixed word)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from datetime import datetime
from functools import cache
from types import SimpleNamespace
from typing import Any
from urllib.parse import urlsplit

from django.db import connection, transaction
from django.utils import timezone

from toolops.models import Attempt, ToolCall, new_span_id
from toolops.policy.verdict import names as policy_names
from toolops.tools import registry
from toolops.tools.spec import ToolSpec

from . import otel
from .vault import args_redacted

# Not ended: no call span yet. An unknown outcome is not an ending either: its span goes
# out when the worker or a person settles it (its looks meanwhile, as children).
_OPEN = (*ToolCall.WAITING, ToolCall.Status.UNKNOWN)
# A tool the catalog does not have is named so in spans: the agent's made-up names would
# otherwise be span names, unbounded (and free text).
UNKNOWN_TOOL = "(unknown)"


def parent_span_of(traceparent: str, trace_id: str) -> str:
    """The agent's span id from its `traceparent` header when the header is of the run's
    trace (the call span becomes its child); "" otherwise."""
    parts = traceparent.strip().split("-")
    if len(parts) != 4 or len(parts[1]) != 32 or len(parts[2]) != 16:
        return ""
    version, trace, span, _flags = parts
    if version == "ff" or trace.lower() != trace_id or span == "0" * 16:
        return ""
    try:
        int(span, 16)
    except ValueError:
        return ""
    return span.lower()


def call_export(*, call: ToolCall, attempts: Sequence[Attempt] = ()) -> None:
    """Export a call's attempts' spans and, once it has ended, its own (off: nothing)."""
    if not otel.exporting():
        return
    trace_id = call.trace_id or call.run.trace_id
    spans = _attempt_spans(call, trace_id, attempts)
    if call.status not in _OPEN:
        spans.append(_call_span(call, trace_id))
    if spans:
        _emit_on_commit(spans)


def call_settled_export(*, call_pk: int) -> None:
    """Export the span of a call whose unknown outcome was just settled (by the worker's
    look or by a person), read as it now stands."""
    if otel.exporting():
        call_export(call=ToolCall.objects.select_related("run").get(pk=call_pk))


def replay_export(*, call: ToolCall, traceparent: str, started: datetime) -> None:
    """A request answered from an earlier call (nothing sent): a span of its own in the
    run's trace, `toolops.replayed = true`, linked to the span of the call it replayed."""
    if not otel.exporting():
        return
    trace_id = call.trace_id or call.run.trace_id
    span = _call_span(
        call,
        trace_id,
        span_id=new_span_id(),
        start=started,
        end=timezone.now(),
        parent_span_id=parent_span_of(traceparent, trace_id) if traceparent else "",
        links=[_otel().Link(_context(trace_id, call.span_id), {"toolops.link": "replays"})],
    )
    _emit_on_commit([span])


def _emit_on_commit(spans: list[Any]) -> None:
    # A span describes what was recorded: inside someone's transaction, it leaves when
    # (and only if) that commits.
    if connection.in_atomic_block:
        transaction.on_commit(lambda: otel.emit(spans))
    else:
        otel.emit(spans)


def attempts_export(*, call: ToolCall, attempts: Sequence[Attempt]) -> None:
    """Export attempts made after their call's span went out (the worker's later looks
    at an unknown outcome): children of the call span already exported."""
    if not otel.exporting() or not attempts:
        return
    _emit_on_commit(_attempt_spans(call, call.trace_id or call.run.trace_id, attempts))


def _ns(moment: datetime) -> int:
    return int(moment.timestamp() * 1e9)


@cache
def _otel() -> SimpleNamespace:
    """The SDK's types, imported once, on the first span built: a process that exports
    nothing never pays for importing the SDK, and one that does pays once, not per span."""
    from opentelemetry.sdk.trace import ReadableSpan  # noqa: PLC0415
    from opentelemetry.trace import (  # noqa: PLC0415
        Link,
        SpanContext,
        SpanKind,
        Status,
        StatusCode,
        TraceFlags,
    )

    return SimpleNamespace(
        ReadableSpan=ReadableSpan,
        Link=Link,
        SpanContext=SpanContext,
        SpanKind=SpanKind,
        OK=Status(StatusCode.OK),
        ERROR=Status(StatusCode.ERROR),
        UNSET=Status(StatusCode.UNSET),
        SAMPLED=TraceFlags(TraceFlags.SAMPLED),
    )


def _context(trace_id: str, span_id: str) -> Any:
    o = _otel()
    return o.SpanContext(int(trace_id, 16), int(span_id, 16), False, o.SAMPLED)


def _call_span(
    call: ToolCall,
    trace_id: str,
    *,
    span_id: str = "",
    start: datetime | None = None,
    end: datetime | None = None,
    parent_span_id: str | None = None,
    links: list[Any] | None = None,
) -> Any:
    o = _otel()
    replayed = bool(span_id)
    spec = registry.get(call.tool)
    tool = call.tool if spec is not None else UNKNOWN_TOOL
    links = list(links or ())
    if call.link and not replayed:
        linked_trace, _, linked_span = call.link.partition("-")
        links.append(o.Link(_context(linked_trace, linked_span), {"toolops.link": "undoes"}))
    parent_id = call.parent_span_id if parent_span_id is None else parent_span_id
    parent = _context(trace_id, parent_id) if parent_id else None
    start = start or call.created_at
    end = end or call.finished_at or timezone.now()
    return o.ReadableSpan(
        name=f"execute_tool {tool}",
        context=_context(trace_id, span_id or call.span_id),
        parent=parent,
        resource=otel.resource(),
        attributes=_call_attributes(call, spec, tool=tool, replayed=replayed),
        links=links,
        kind=o.SpanKind.INTERNAL,
        status=o.OK if call.status == ToolCall.Status.SUCCEEDED else o.ERROR,
        start_time=_ns(start),
        end_time=max(_ns(end), _ns(start)),
        instrumentation_scope=otel.scope(),
    )


def _call_attributes(
    call: ToolCall, spec: ToolSpec | None, *, tool: str, replayed: bool
) -> dict[str, Any]:
    """The call span's attributes: the GenAI conventions' and ToolOps' own."""
    redacted = args_redacted(call)
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": tool,
        "gen_ai.tool.call.id": call.tool_call_id,
        "toolops.run_id": call.run.run_id,
        "toolops.call_id": call.call_id,
        "toolops.step_index": call.step_index,
        "toolops.status": call.status,
        "toolops.replayed": replayed,
        "toolops.args_hash": args_hash(call, redacted=redacted),
        "toolops.attempts": call.attempts,
    }
    # Never the key itself: a plain hash of the args (otel.key_hmac). None when the args
    # had anything redacted.
    if call.idempotency_key and (spec is None or not spec.is_read) and not redacted:
        attributes["toolops.idempotency_key_hmac"] = otel.key_hmac(call.idempotency_key)
    if call.role == ToolCall.Role.UNDO:
        attributes["toolops.role"] = "compensation"
    if call.policy_version is not None:
        # The agent policy's word on it (API.md "Agent policy"), as the call object says.
        attributes["toolops.policy.version"] = call.policy_version
        attributes["toolops.policy.rules"] = policy_names(call.policy_rules)
    if call.status != ToolCall.Status.SUCCEEDED:
        attributes["error.type"] = call.error_reason or call.status
    return attributes


def _attempt_spans(call: ToolCall, trace_id: str, attempts: Iterable[Attempt]) -> list[Any]:
    o = _otel()
    spec = registry.get(call.tool)
    query_tool = spec.query.tool if spec is not None and spec.query is not None else None
    parent = _context(trace_id, call.span_id)
    spans = []
    for row in attempts:
        reconcile = row.purpose == "reconcile"
        tool = (query_tool or call.tool) if reconcile else call.tool
        target = registry.get(tool)
        attributes: dict[str, Any] = {
            "toolops.attempt": row.number,
            "toolops.purpose": row.purpose,
            "gen_ai.tool.name": tool,
        }
        if target is not None and target.url:
            attributes["http.request.method"] = target.method
            host = urlsplit(target.url).hostname
            if host:
                attributes["server.address"] = host
        if row.http_status is not None:
            attributes["http.response.status_code"] = row.http_status
        if row.downstream_request_id:
            attributes["toolops.downstream_request_id"] = row.downstream_request_id
        if row.waited_ms:
            attributes["toolops.waited_ms"] = round(row.waited_ms, 3)
        ok = row.outcome == "ok"
        if not ok:
            attributes["toolops.failure_class"] = row.outcome
            attributes["error.type"] = row.reason or (
                str(row.http_status) if row.http_status else row.outcome
            )
        start = _ns(row.started_at)
        method = attributes.get("http.request.method")
        name = f"reconcile {tool}" if reconcile else f"{method + ' ' if method else ''}{tool}"
        spans.append(
            o.ReadableSpan(
                name=name,
                context=_context(trace_id, row.span_id),
                parent=parent,
                resource=otel.resource(),
                attributes=attributes,
                kind=o.SpanKind.CLIENT,
                status=o.UNSET if ok else o.ERROR,
                start_time=start,
                end_time=start + int(row.duration_ms * 1e6),
                instrumentation_scope=otel.scope(),
            )
        )
    return spans


def args_hash(call: ToolCall, *, redacted: bool | None = None) -> str:
    """The args hash a span carries: the call's own when its args held nothing sensitive;
    else a hash of the redacted args, so that a collector's data cannot confirm a guess
    at a redacted value (an e-mail plus fixed text is small enough to guess)."""
    if not (args_redacted(call) if redacted is None else redacted):
        return call.args_digest
    stored = json.dumps(call.args, sort_keys=True, separators=(",", ":"), default=str)
    return "redacted:" + hashlib.sha256(stored.encode()).hexdigest()
