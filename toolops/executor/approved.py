"""An approved call runs through the normal path from its claim on: the claim was taken
when the call was held for a person (so the same request again was the same pending
call), and the worker that executes it takes it up with a new fence — then attempts,
breaker, retries, unknown-outcome reconciliation and the record (with its compensation),
exactly as for a call that needed nobody."""

from __future__ import annotations

from django.utils import timezone

from toolops.models import Run, ToolCall
from toolops.tools import registry

from . import claims, feedback
from .execution import Execution, Tokens, lease_s

Status = ToolCall.Status


def execute_held_call(*, call: ToolCall) -> str:
    """Run an approved call once. Its status when done."""
    run = call.run
    spec = registry.get(call.tool)
    if run.status not in (Run.Status.RUNNING, Run.Status.BUDGET_EXHAUSTED) or spec is None:
        why = f"the run is {run.status}" if spec else f"{call.tool} is no longer in the catalog"
        return _end_unsent(call, why)
    fence = claims.reclaim(key=call.idempotency_key, lease_s=lease_s(spec))
    if fence is None:
        return _end_unsent(call, "its idempotency claim was closed")
    execution = Execution(run=run, call=call, spec=spec, tokens=Tokens(run, 0), fence=fence)
    execution.run_attempts()
    execution.record(insert=False)
    return execution.call.status


def _end_unsent(call: ToolCall, why: str) -> str:
    message = f"approved, but not run: {why}"
    text = feedback.fatal(call.tool, f"{message}; nothing was sent")
    ToolCall.objects.filter(pk=call.pk, status=Status.IN_PROGRESS).update(
        status=Status.FAILED, error_class="fatal", error_reason=ToolCall.Reason.REJECTED,
        error_message=message, feedback=text, finished_at=timezone.now(),
    )  # fmt: skip
    if call.idempotency_key:
        claims.close(key=call.idempotency_key)
    return Status.FAILED
