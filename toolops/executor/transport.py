"""Send one attempt of a call through its tool's transport, with ToolOps' headers."""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from typing import Any

from toolops.models import Run, ToolCall
from toolops.tools import http, local
from toolops.tools.outcome import Outcome
from toolops.tools.spec import ToolSpec
from traces.services import spans_exporting


def send(
    spec: ToolSpec,
    call: ToolCall,
    run: Run,
    args: dict[str, Any],
    *,
    attempt: int,
    span_id: str,
    trace_id: str | None = None,
) -> Outcome:
    """`trace_id`: the run's by default; a compensation's spans start a trace of their own."""
    if spec.func is not None:
        return local.call(spec.func, args, timeout_s=spec.timeout_s)
    assert spec.url is not None
    body = dict(args)
    if spec.client_reference:
        body[spec.client_reference] = call.client_reference
    headers = {
        # Always sent; `idempotency_header` only says whether the downstream honours it.
        "Idempotency-Key": call.idempotency_key or "",
        # The attempt's own span is the parent: each attempt carries a different parent id.
        "traceparent": f"00-{trace_id or run.trace_id}-{span_id}-01",
        "X-Toolops-Run-Id": run.run_id,
        "X-Toolops-Tool-Call-Id": call.tool_call_id,
        "X-Toolops-Attempt": str(attempt),
    }
    with _uninstrumented():
        return http.send(
            url=spec.url, method=spec.method, body=body, headers=headers, timeout_s=spec.timeout_s
        )


def _uninstrumented() -> AbstractContextManager[object]:
    # The attempt span is this request's client span (traces/spans.py): the urllib3
    # instrumentation, when export is on, must neither double it nor replace the
    # `traceparent` that names it.
    if not spans_exporting():
        return nullcontext()
    # Loaded only when spans are exported: a process that exports none never loads it.
    from opentelemetry.instrumentation.utils import suppress_http_instrumentation  # noqa: PLC0415

    return suppress_http_instrumentation()
