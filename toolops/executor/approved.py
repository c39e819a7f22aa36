"""An approved call runs through the normal path from its claim on: the claim was taken
when the call was held for a person (so the same request again was the same pending
call), and the worker that executes it takes it up with a new fence — then attempts,
breaker, retries, unknown-outcome reconciliation and the record (with its compensation),
exactly as for a call that needed nobody."""

from __future__ import annotations

from django.utils import timezone

from toolops.models import ToolCall
from toolops.policy import limits as spend
from toolops.tools import registry

from . import claims, feedback
from .budget import Budget
from .execution import Execution
from .record import record

Status = ToolCall.Status


def approved_call_take_up(*, call: ToolCall) -> int | None:
    """Take up the held call's claim for the worker that executes it: the hold's fence
    (1) becomes 2, with an ordinary lease. None — nothing will be sent — when the claim
    is no longer the hold's (a sweep recovered the call meanwhile), or the tool left the
    catalog (the call then ends failed, with nothing sent)."""
    spec = registry.get(call.tool)
    if spec is None:
        _end_unsent(call, f"{call.tool} is no longer in the catalog")
        return None
    return claims.reclaim(key=call.idempotency_key, lease_s=claims.lease_s(spec))


def approved_call_execute(*, call: ToolCall, fence: int) -> str:
    """Run an approved call once, under the fence `approved_call_take_up` returned. Its status when
    done."""
    spec = registry.get(call.tool)
    assert spec is not None  # approved_call_take_up checked, a moment ago
    run = call.run
    execution = Execution(call=call, spec=spec, budget=Budget(run), fence=fence)
    execution.run_attempts()
    record(execution, insert=False)
    return execution.call.status


def _end_unsent(call: ToolCall, why: str) -> None:
    message = f"approved, but not run: {why}"
    text = feedback.fatal(call.tool, f"{message}; nothing was sent")
    ended = ToolCall.objects.filter(pk=call.pk, status=Status.IN_PROGRESS).update(
        status=Status.FAILED,
        error_class="fatal",
        error_reason=ToolCall.Reason.REJECTED,
        error_message=message,
        feedback=text,
        finished_at=timezone.now(),
    )
    if ended and call.policy_holds:
        spend.give_back(call.run.agent_id, call.policy_holds)
    if ended and call.idempotency_key:
        claims.close(key=call.idempotency_key)
