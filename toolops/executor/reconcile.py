"""Settle an unknown outcome by asking the tool's `query` tool (DESIGN.md "unknown")."""

from __future__ import annotations

import enum
import logging
import time
from typing import Any

from django.utils import timezone

from toolops.models import Attempt, Run, ToolCall, new_span_id
from toolops.tools import registry
from toolops.tools.mapping import resolve_mapping
from toolops.tools.spec import ToolSpec
from traces import services as traces

from . import breaker
from .transport import send

log = logging.getLogger(__name__)

QUERY_TRIES = 2


class QueryResult(enum.Enum):
    FOUND = "found"
    NOT_FOUND = "not_found"
    FAILED = "failed"


def query_outcome(
    spec: ToolSpec, call: ToolCall, run: Run
) -> tuple[QueryResult, Any, list[Attempt]]:
    """Ask the query tool; 2xx → found with its body, 404 → not found, else failed."""
    assert spec.query is not None
    qspec = registry.get(spec.query.tool)
    if qspec is None:
        return QueryResult.FAILED, None, []
    try:
        qargs = resolve_mapping(spec.query, spec, call)
    except traces.SealedArgsUnavailable as exc:
        # A look for "[redacted email]" would find nothing, and "not found" would end the
        # call failed: the agent would send again what may have taken effect. The look
        # fails instead; the call stays unknown.
        log.error("%s: the look with %s was not sent", exc, qspec.name)
        return QueryResult.FAILED, None, []
    rows: list[Attempt] = []
    for n in range(1, QUERY_TRIES + 1):
        # The query tool has a breaker of its own, shared with every process: while it is
        # open, nothing is sent and the outcome stays unknown for a later look.
        admission = breaker.admit(qspec)
        if not admission.allowed:
            break
        span_id = new_span_id()
        started = timezone.now()
        t0 = time.perf_counter()
        # In the call's trace: a compensation's is its own, not the run's.
        outcome = send(
            qspec, call, run, qargs, attempt=n, span_id=span_id, trace_id=call.trace_id or None
        )
        rows.append(
            Attempt(
                call=call,
                number=call.attempts,
                span_id=span_id,
                started_at=started,
                duration_ms=(time.perf_counter() - t0) * 1000,
                http_status=outcome.status,
                outcome="ok" if outcome.ok else "query_failed",
                error=traces.redact_text(outcome.message, call=call)[:2000],
                downstream_request_id=outcome.request_id,
                purpose="reconcile",
            )
        )
        rows[-1].health = breaker.health_of(outcome)
        breaker.report(qspec, admission, rows[-1].health)
        if outcome.ok:
            return QueryResult.FOUND, outcome.body, rows
        if outcome.status == 404:
            return QueryResult.NOT_FOUND, None, rows
        if outcome.status is not None and 400 <= outcome.status < 500 and outcome.status != 429:
            break
        time.sleep(0.1 * n)
    return QueryResult.FAILED, None, rows
