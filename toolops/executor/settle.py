"""Settling what a request could not: unknown outcomes (asked again by the worker, or
settled by a person) and claims whose holder died (found by the sweep)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.db import transaction
from django.db.models import Q
from django.db.models.functions import Now
from django.utils import timezone

from toolops.models import Attempt, IdempotencyRecord, ToolCall
from toolops.policy import limits as spend
from toolops.tools import registry
from toolops.tools.spec import ToolSpec
from traces import services as traces

from . import feedback, register
from .reconcile import QueryResult, query_outcome
from .replay import recover_stale_claim

Status = ToolCall.Status
# After this many failed looks the call waits for a person (the console lists it).
RECONCILE_MAX_ATTEMPTS = 20
RECONCILE_CAP_S = 300.0


def unknown_calls_due(*, limit: int = 50) -> list[int]:
    return list(
        # The worker's undo calls are settled on their ticket, with their compensation.
        ToolCall.objects.agent_calls()
        .filter(status=Status.UNKNOWN, next_reconcile_at__lte=timezone.now())
        .order_by("next_reconcile_at")
        .values_list("pk", flat=True)[:limit]
    )


def call_reconcile(*, call_pk: int) -> str:
    """Ask the query tool once more about an unknown call. Safe to run twice at once:
    the first to move next_reconcile_at owns this look."""
    call = _take_look(call_pk)
    if call is None:
        return "skipped"
    spec = registry.get(call.tool)
    if spec is None or spec.query is None:
        ToolCall.objects.filter(pk=call.pk).update(next_reconcile_at=None)
        return "needs_person"

    outcome, found, rows = query_outcome(spec, call, call.run)
    with transaction.atomic():
        Attempt.objects.bulk_create(rows)
        # The looks are children of the call span, which goes out when the call is settled.
        traces.attempts_export(call=call, attempts=rows)
        traces.run_changed(run_pk=call.run_id)  # sent when this commits, whatever it settles
        if outcome is QueryResult.FOUND:
            _settle_found(call, spec, found)
            return "succeeded"
        if outcome is QueryResult.NOT_FOUND:
            _settle_not_found(call, spec)
            return "failed"
        tries = call.reconcile_attempts + 1
        delay = min(RECONCILE_CAP_S, 5.0 * 2**tries)
        ToolCall.objects.filter(pk=call.pk, status=Status.UNKNOWN).update(
            reconcile_attempts=tries,
            next_reconcile_at=(
                timezone.now() + timedelta(seconds=delay)
                if tries < RECONCILE_MAX_ATTEMPTS
                else None
            ),
        )
    return "unknown"


def _settle_found(call: ToolCall, spec: ToolSpec, found: Any) -> None:
    """The query tool found the write: it succeeded, with its undo registered in the same
    transaction (never a success without its undo)."""
    assert spec.query is not None
    traces.result_seal(call, found, spec=spec)  # stored redacted, sealed whole
    settled = ToolCall.objects.filter(pk=call.pk, status=Status.UNKNOWN).update(
        status=Status.SUCCEEDED,
        result=call.result,
        result_sealed=call.result_sealed,
        error_class="",
        error_reason="",
        error_message="",
        feedback=feedback.reconciled(spec.name, spec.query.tool),
        finished_at=timezone.now(),
        next_reconcile_at=None,
    )
    if settled:
        call.status = Status.SUCCEEDED
        register.register_late(call=call, spec=spec)
        traces.call_settled_export(call_pk=call.pk)  # its span, at last


def _settle_not_found(call: ToolCall, spec: ToolSpec) -> None:
    """The write provably did not happen. The agent was told not to retry, so the worker
    does not send it behind its back: it says so, and the agent decides."""
    assert spec.query is not None
    query = spec.query.tool
    failed = ToolCall.objects.filter(pk=call.pk, status=Status.UNKNOWN).update(
        status=Status.FAILED,
        error_class="fatal",
        error_message=f"{query} found no trace of it: it did not take effect",
        feedback=feedback.not_applied(spec.name, query),
        finished_at=timezone.now(),
        next_reconcile_at=None,
    )
    if failed:
        _free(call)
        traces.call_settled_export(call_pk=call.pk)


def _take_look(call_pk: int) -> ToolCall | None:
    """The unknown call, its look ours for a minute; None when it is not due, or another
    worker is looking right now."""
    now = timezone.now()
    call = ToolCall.objects.select_related("run").filter(pk=call_pk).first()
    if call is None or call.status != Status.UNKNOWN or call.next_reconcile_at is None:
        return None
    if call.next_reconcile_at > now:
        return None
    if not ToolCall.objects.filter(
        pk=call.pk, status=Status.UNKNOWN, next_reconcile_at=call.next_reconcile_at
    ).update(next_reconcile_at=now + timedelta(seconds=60)):
        return None
    return call


def call_settle(*, call: ToolCall, by: Any, succeeded: bool, note: str, result: Any = None) -> bool:
    """A person settles an unknown outcome. Returns False when it was settled already."""
    if not note.strip():
        raise ValueError("a note is required")
    spec = registry.get(call.tool)
    if succeeded:
        traces.result_seal(call, result, spec=spec)  # stored redacted, sealed whole
    fields: dict[str, Any] = {
        "settled_by": by,
        "settle_note": traces.redact_text(note.strip(), call=call),
        "finished_at": timezone.now(),
        "next_reconcile_at": None,
    }
    if succeeded:
        fields.update(
            status=Status.SUCCEEDED,
            result=call.result,
            result_sealed=call.result_sealed,
            error_class="",
            error_reason="",
            error_message="",
            feedback=feedback.settled(call.tool, succeeded=True),
        )
    else:
        fields.update(
            status=Status.FAILED,
            error_class="fatal",
            error_message=traces.redact_text(
                f"settled as failed by a person: {note.strip()[:200]}", call=call
            ),
            feedback=feedback.settled(call.tool, succeeded=False),
        )
    with transaction.atomic():
        settled = ToolCall.objects.filter(pk=call.pk, status=Status.UNKNOWN).update(**fields) == 1
        traces.run_changed(run_pk=call.run_id)
        if settled and succeeded:
            call.status = Status.SUCCEEDED
            register.register_late(call=call, spec=spec)
        elif settled:
            _free(call)
        if settled:
            traces.call_settled_export(call_pk=call.pk)
    return settled


def stale_claim_keys(*, limit: int = 50) -> list[str]:
    return list(
        IdempotencyRecord.objects.filter(
            Q(state=IdempotencyRecord.State.CLAIMED) & Q(lease_until__lt=Now())
        ).values_list("key", flat=True)[:limit]
    )


def claim_recover(*, key: str) -> str:
    call = recover_stale_claim(key=key)
    return "skipped" if call is None else call.status


def _free(call: ToolCall) -> None:
    """An unknown call settled as not done gives its reserved spend back."""
    if call.policy_holds:
        spend.give_back(call.run.agent_id, call.policy_holds)
