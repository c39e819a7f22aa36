"""The path of one call (DESIGN.md), one module per stage, in order. `submit` is the spine
from replay.py on; toolops.services.call_create makes the first two:

    prepare.py     tool lookup → args schema → idempotency key, before any database work
    context.py     the run, read with all the call needs of it, in one query
    replay.py      a repeat of an earlier call is answered with it
    depends.py     dependency check
    gate.py        approval gate (budget and breaker are asked by the attempts)
    statements/    the three round trips of a write: context, claim, result
    execution.py   attempts: breaker, budget, timeout, classify, backoff, reconcile
    record.py      record the result + register the compensation, one statement
    feedback.py    the line for the model, set by every ending

Every stage can end the call, and every ending is a recorded call with feedback. The
downstream is never called inside a transaction: the claim commits first, the result is
recorded after, under the claim's fencing token."""

from __future__ import annotations

import difflib
import time

from django.db import IntegrityError
from django.utils import timezone

from toolops.crash import crash_point
from toolops.ids import new_call_id, new_tool_call_id
from toolops.models import Run, ToolCall
from toolops.policy.limits import Hold
from toolops.policy.verdict import Verdict
from toolops.tools import registry
from toolops.tools.spec import ToolSpec
from traces import services as traces

from . import admit, claims, depends, feedback, gate, replay
from .budget import Budget
from .context import CallContext
from .endings import end
from .errors import RunNotRunning
from .execution import Execution
from .keys import client_reference
from .prepare import CallAnswer, CallRequest, Prepared
from .record import record, record_unexecuted
from .statements.claim import claim
from .statements.parts import is_tool_call_id_clash
from .wait import wait_for

Status = ToolCall.Status
Reason = ToolCall.Reason


def submit(context: CallContext, request: CallRequest, prepared: Prepared) -> CallAnswer:
    """A call in the context's run, answered as API.md says: a new call, an earlier one's
    answer (`replayed`), or one that waits (held, in progress) after up to `wait` s."""
    # A replay's span needs its start; nothing else on this path does.
    started = timezone.now() if traces.spans_exporting() else None
    begun = time.monotonic()
    answer = _answer(context, request, prepared)
    if answer.replayed:
        if started is not None:
            traces.replay_export(call=answer.call, traceparent=request.traceparent, started=started)
        # Answered with an existing call (its idempotency record, an earlier call with this
        # tool_call_id, or after waiting for the first request): no call row is written,
        # so the hit rate counts it here, in one statement.
        traces.replay_noted(tool=answer.call.tool)
    # A duplicate may already have waited for the first request: `wait` is the whole wait.
    left = request.wait - (time.monotonic() - begun)
    if answer.call.is_waiting and left > 0:
        answer.call = wait_for(call=answer.call, seconds=left)
    answer.call.run = context.run
    return answer


def _answer(context: CallContext, request: CallRequest, prepared: Prepared) -> CallAnswer:
    run = context.run
    if run.status != Run.Status.RUNNING:
        raise RunNotRunning(run)
    earlier = replay.earlier_answer(context, request, prepared)
    if earlier is not None:
        return earlier
    failed_dependencies = depends.failed(run, request.depends_on)
    call = _new_call(run, request, prepared)
    budget = Budget(run, request.tokens)
    if _refused(call, prepared, failed_dependencies):
        return record_unexecuted(call, budget)
    spec, key = prepared.spec, prepared.key
    assert spec is not None and key is not None
    # Reads carry a key too (API.md: Idempotency-Key is always sent), made the same way.
    call.idempotency_key, call.client_reference = key, client_reference(key)
    # The agent policy (admit.py): not permitted ends here; the rest is a hold, a lifted
    # approval, or spend the claim reserves.
    verdict = admit.verdict(context, call, spec, prepared.args)
    if verdict is not None and admit.refused(call, verdict):
        return record_unexecuted(call, budget)
    if spec.is_read:
        return _read(context, call, spec, budget, request, verdict)
    # The approval gate: one question, and nothing read or written when the answer is no.
    need = gate.approval_needed(
        run=run, spec=spec, duplicate_of=context.session_duplicate_pk, verdict=verdict
    )
    if need is not None and not gate.takes_run_past_max_tokens(run, request.tokens):
        return _hold(context, call, spec, budget, request, verdict, need, admit.holds(verdict))
    return _claim_and_run(context, call, spec, budget, request, verdict)


def _hold(
    context: CallContext,
    call: ToolCall,
    spec: ToolSpec,
    budget: Budget,
    request: CallRequest,
    verdict: Verdict | None,
    need: gate.Need,
    holds: list[Hold],
) -> CallAnswer:
    """Hold the call for a person; past a limit, as that limit says."""
    held = gate.hold(run=context.run, call=call, spec=spec, need=need, request=request, holds=holds)
    if not isinstance(held, gate.OverLimit):
        return held
    assert verdict is not None  # only a policy's limits can be over
    return _over_limit(context, call, spec, budget, request, verdict, held.indexes, need)


def _over_limit(
    context: CallContext,
    call: ToolCall,
    spec: ToolSpec,
    budget: Budget,
    request: CallRequest,
    verdict: Verdict,
    over: tuple[int, ...],
    need: gate.Need | None,
) -> CallAnswer:
    """A call over a limit: held for a reviewer when every limit it passed says so
    (`on_exceed = "approve"`), refused with `spend_limit` otherwise."""
    past = admit.past_limits(verdict, over)
    decided = call.policy_rules
    if past is not None:
        uncapped, limit = past
        call.policy_rules = [*(call.policy_rules or []), [limit, "approve"]]
        call.policy_holds = [hold.as_json() for hold in uncapped]
        if need is None:
            _, sentence = admit.over_sentence(call, verdict, over, context.run.agent_id, held=True)
            need = gate.over_limit_need(spec, limit, verdict.version, sentence)
        held = gate.hold(
            run=context.run, call=call, spec=spec, need=need, request=request, holds=uncapped
        )
        if not isinstance(held, gate.OverLimit):
            return held
        over, call.policy_rules = held.indexes, decided
    admit.end_over_limit(call, verdict, over, context.run.agent_id)
    return record_unexecuted(call, budget)


def _new_call(run: Run, request: CallRequest, prepared: Prepared) -> ToolCall:
    """The call row as the request makes it: in progress, its args sealed (stored, shown
    and exported redacted; the full args stay in memory for the downstream and go to
    the vault with the row when anything was redacted)."""
    call = ToolCall(
        call_id=new_call_id(),
        run=run,
        tool_call_id=request.tool_call_id or new_tool_call_id(),
        step_index=request.step_index,
        tool=request.tool,
        args=prepared.args if prepared.args is not None else None,
        args_digest=prepared.digest,
        depends_on=list(request.depends_on),
        tokens=request.tokens,
        status=Status.IN_PROGRESS,
        parent_span_id=(
            traces.parent_span_of(request.traceparent, run.trace_id) if request.traceparent else ""
        ),
    )
    traces.args_seal(call, spec=prepared.spec)
    return call


def _refused(call: ToolCall, prepared: Prepared, failed_dependencies: list[str]) -> bool:
    """End a call that must not run — unknown tool, invalid args, a dependency that did
    not succeed — before anything is sent. True when it was ended."""
    spec = prepared.spec
    if spec is None:
        close = difflib.get_close_matches(call.tool, registry.names(), n=3, cutoff=0.5)
        end(
            call,
            Status.FAILED,
            "fatal",
            Reason.UNKNOWN_TOOL,
            f"unknown tool {call.tool!r}",
            feedback.unknown_tool(call.tool, close),
        )
    elif prepared.problem is not None:
        end(
            call,
            Status.FAILED,
            "fatal",
            Reason.INVALID_ARGS,
            prepared.problem,
            feedback.invalid_args(spec.name, prepared.problem),
        )
    elif failed_dependencies:
        message = f"depends on {', '.join(failed_dependencies)}"
        end(
            call,
            Status.SKIPPED,
            "fatal",
            Reason.DEPENDENCY_FAILED,
            message,
            feedback.dependency_failed(failed_dependencies),
        )
    else:
        return False
    return True


def _read(
    context: CallContext,
    call: ToolCall,
    spec: ToolSpec,
    budget: Budget,
    request: CallRequest,
    verdict: Verdict | None,
) -> CallAnswer:
    """Reads pass through: no claim, and the call row is written once, at the end. A
    read a limit counts reserves first, on its own; past the limit it is refused (a read
    is never held for a person)."""
    if budget.charge_tokens_now():
        _end_over_tokens(call)
        call.policy_holds = None
        return record_unexecuted(call, budget)
    over = admit.reserve_now(call, verdict, context.run.agent_id)
    if over:
        assert verdict is not None
        admit.end_over_limit(call, verdict, over, context.run.agent_id)
        return record_unexecuted(call, budget)
    execution = Execution(
        call=call, spec=spec, budget=budget, fence=None, breaker_row=context.breaker
    )
    execution.run_attempts()
    return _recorded(execution, insert=True, request=request)


def _claim_and_run(
    context: CallContext,
    call: ToolCall,
    spec: ToolSpec,
    budget: Budget,
    request: CallRequest,
    verdict: Verdict | None,
) -> CallAnswer:
    """Claim the key with the call row (and, in a limited run, the first attempt and the
    tokens, in the same statement), then the attempts and the record. A lost claim is a
    replay: it waits for the winner's answer and counts no tokens."""
    run = context.run
    try:
        claimed = claim(
            call,
            lease_s=claims.lease_s(spec),
            ttl_s=claims.ttl_s(),
            charge=budget.upfront(),
            holds=admit.holds(verdict),
        )
    except IntegrityError as exc:
        if not is_tool_call_id_clash(exc):
            raise
        # Another request with this tool_call_id but other args got in first.
        existing = replay.by_tool_call_id(run, request)
        return replay.answer_existing(existing, request, call.args_digest, spec)
    if claimed.over:
        assert verdict is not None  # only a policy's limits can be over
        return _over_limit(context, call, spec, budget, request, verdict, claimed.over, None)
    if not claimed.won:
        return replay.follow(run=run, spec=spec, key=call.idempotency_key, wait=request.wait)
    crash_point("after-claim")  # fault tests: a holder dead with its claim, nothing sent
    traces.run_changed(run_pk=run.pk)  # in flight: its run's open pages show it now
    execution = Execution(call=call, spec=spec, budget=budget, fence=1, breaker_row=context.breaker)
    if claimed.reached is not None:
        budget.claimed(claimed.reached)
        execution.run_attempts()
    elif budget.charge_tokens_now():  # the budget did not fit: tell which limit, the long way
        _end_over_tokens(call)
    else:
        execution.run_attempts()
    return _recorded(execution, insert=False, request=request)


def _recorded(execution: Execution, *, insert: bool, request: CallRequest) -> CallAnswer:
    try:
        recorded = record(execution, insert=insert)
    except IntegrityError as exc:
        # A read raced by another request with the same tool_call_id; anything else
        # is not ours to explain away.
        if not is_tool_call_id_clash(exc):
            raise
        existing = replay.by_tool_call_id(execution.run, request)
        return replay.answer_existing(existing, request, execution.call.args_digest, execution.spec)
    # Not recorded: our lease ran out and someone else holds this call; theirs is the answer.
    return CallAnswer(execution.call, replayed=not recorded)


def _end_over_tokens(call: ToolCall) -> None:
    what = f"max_tokens {call.run.max_tokens} exceeded"
    end(
        call, Status.FAILED, "fatal", Reason.BUDGET_EXHAUSTED, what, feedback.budget_exhausted(what)
    )
