"""Requests that repeat a call already made (DESIGN.md "idempotency"): answered with the
earlier call — found by its tool_call_id or by its key's claim — after waiting for its
result while its first request is still at work, or by taking the claim over when that
request's holder died. A taken-over write is never re-sent blindly: its query tool is
asked first, or its outcome stays unknown for a person (execution.resume)."""

from __future__ import annotations

import time

from toolops.crash import crash_point
from toolops.models import Run, ToolCall
from toolops.tools import registry
from toolops.tools.spec import ToolSpec

from . import claims
from .budget import Budget
from .context import CallContext
from .errors import ToolCallConflict
from .execution import Execution
from .prepare import CallAnswer, CallRequest, Prepared
from .record import record

Status = ToolCall.Status


def earlier_answer(
    context: CallContext, request: CallRequest, prepared: Prepared
) -> CallAnswer | None:
    """The answer of an earlier call this request repeats; None: it repeats none."""
    run = context.run
    if context.existing_call_pk is not None:
        existing = ToolCall.objects.select_related("run").get(pk=context.existing_call_pk)
        return answer_existing(existing, request, prepared.digest, prepared.spec)
    if context.claim_hit is None:
        return None
    # A replay, seen by the run's own query: answered without another statement.
    state, recorded = context.claim_hit
    recorded.run = run
    if state.state == "recorded":
        return CallAnswer(recorded, replayed=True)
    assert prepared.spec is not None and prepared.write_key is not None
    return follow(run=run, spec=prepared.spec, key=prepared.write_key, wait=request.wait)


def by_tool_call_id(run: Run, request: CallRequest) -> ToolCall:
    return ToolCall.objects.get(run=run, tool_call_id=request.tool_call_id)


def answer_existing(
    existing: ToolCall, request: CallRequest, args_digest: str, spec: ToolSpec | None
) -> CallAnswer:
    """The answer of the run's call with the request's tool_call_id: the same call again
    (step, tool and args), or a conflict."""
    same = (
        existing.step_index == request.step_index
        and existing.tool == request.tool
        and existing.args_digest == args_digest
    )
    if not same:
        raise ToolCallConflict(
            f"tool_call_id {existing.tool_call_id!r} was already used in this run for another "
            f"call (step {existing.step_index}, tool {existing.tool}); use a new tool_call_id"
        )
    if existing.status == Status.IN_PROGRESS and existing.idempotency_key and spec is not None:
        # The first request is still at work: wait for its result like any duplicate.
        return follow(run=existing.run, spec=spec, key=existing.idempotency_key, wait=request.wait)
    return CallAnswer(existing, replayed=True)


def follow(*, run: Run, spec: ToolSpec, key: str, wait: float) -> CallAnswer:
    """We lost the claim: wait up to `wait` seconds for the winner's result (0: look once
    and answer `in_progress`, API.md), or take over a dead winner's claim. The API hands
    this wait to its event loop (toolops/api/longpoll.py) and calls this with 0."""
    deadline = time.monotonic() + wait
    pause = 0.005
    while True:
        found = claims.peek_with_call(key=key)
        if found is None:  # purged between our claim and now: vanishingly rare
            raise ToolCallConflict("the idempotency record vanished; send the call again")
        state, call = found
        call.run = run  # the key is the run's: the call is in this run
        if state.state == "recorded" or call.status == Status.PENDING_APPROVAL:
            # A call held for a person is answered as it stands; `wait` long-polls it.
            return CallAnswer(call, replayed=True)
        if state.lease_expired:
            fence = claims.take_over(key=key, seen_fence=state.fence, lease_s=claims.lease_s(spec))
            if fence is not None:
                return CallAnswer(_recover(call=call, spec=spec, fence=fence), replayed=True)
            continue
        if time.monotonic() >= deadline:
            return CallAnswer(call, replayed=True)
        time.sleep(pause)
        pause = min(pause * 2, 0.1)


def recover_stale_claim(*, key: str) -> ToolCall | None:
    """Settle a claim whose holder died (the periodic sweep): the same path a duplicate
    request takes when it finds the lease expired. None when there was nothing to do."""
    found = claims.peek_with_call(key=key)
    if found is None:
        return None
    state, call = found
    if call.role == ToolCall.Role.UNDO or call.status == Status.PENDING_APPROVAL:
        # The compensations sweep resumes its own calls; a held call waits for a person.
        return None
    spec = registry.get(call.tool)
    if state.state != "claimed" or not state.lease_expired or spec is None:
        return None
    fence = claims.take_over(key=key, seen_fence=state.fence, lease_s=claims.lease_s(spec))
    if fence is None:
        return None
    crash_point("mid-sweep")  # fault tests: a claim taken over, neither settled nor sent
    return _recover(call=call, spec=spec, fence=fence)


def _recover(*, call: ToolCall, spec: ToolSpec, fence: int) -> ToolCall:
    """The claim's holder died between claim and record. Never re-send an unsafe write
    blindly: ask its query tool first, or leave the outcome unknown for a person."""
    execution = Execution(call=call, spec=spec, budget=Budget(call.run), fence=fence)
    execution.resume()
    record(execution, insert=False)
    return execution.call
