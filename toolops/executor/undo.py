"""One round of a compensation, as an ordinary executor call of the undo tool: its own
idempotency key and claim, attempts, spans and breaker (API.md "Tool catalog file").

The worker calls this; it knows nothing of compensation records (compensations/ owns
those). The key is the same on every round and every re-send, so a downstream that
honours Idempotency-Key applies the undo once; a claim whose holder died is taken over
after its lease and resumed exactly as a duplicate request would resume it."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from toolops.ids import new_call_id
from toolops.models import Run, ToolCall
from toolops.tools import registry
from toolops.tools.spec import ToolSpec
from traces import services as traces

from . import claims, feedback
from .budget import Budget
from .canonical import canonical_json, digest
from .endings import end
from .execution import Execution
from .keys import client_reference
from .prepare import schema_problem
from .record import record
from .statements.claim import claim

# An undo's retries (API.md): the undo tool's max_attempts when the catalog sets it, else
# 5; backoff from 1 s, capped at 30 s.
UNDO_MAX_ATTEMPTS = 5
UNDO_BACKOFF_BASE_S = 1.0
UNDO_BACKOFF_CAP_S = 30.0


def undo_spec(spec: ToolSpec) -> ToolSpec:
    attempts = spec.max_attempts if spec.max_attempts_declared else UNDO_MAX_ATTEMPTS
    return spec.with_policy(
        {
            "max_attempts": attempts,
            "backoff_base_s": UNDO_BACKOFF_BASE_S,
            "backoff_cap_s": UNDO_BACKOFF_CAP_S,
        }
    )


def undo_execute(
    *,
    run: Run,
    undoes: ToolCall,
    tool: str,
    args: dict[str, Any] | None,
    problem: str,
    key: str,
    round_number: int,
    trace_id: str,
) -> ToolCall | None:
    """Run round `round_number` of the undo of `undoes`, and record it. Returns the
    finished undo call — or None while another live worker holds this round."""
    call = ToolCall(
        call_id=new_call_id(),
        run=run,
        # Outside the agents' id alphabet ("~"), so no agent's tool_call_id can clash.
        tool_call_id=f"~undo:{undoes.call_id}:{round_number}",
        step_index=undoes.step_index,
        tool=tool,
        args=args,
        args_digest=digest(canonical_json(args or {})),
        idempotency_key=key,
        client_reference=client_reference(key),
        status=ToolCall.Status.IN_PROGRESS,
        role=ToolCall.Role.UNDO,
        # Its spans start a trace of their own, linked to the span of the call it undoes.
        trace_id=trace_id,
        link=f"{undoes.trace_id or run.trace_id}-{undoes.span_id}",
    )
    found = registry.get(tool)
    spec = undo_spec(found) if found is not None else None
    # Redacted like any call's args, and like the call it undoes (its values may be
    # mapped into these); the full args are sealed with the call row.
    traces.args_seal(call, spec=spec, source=undoes)
    problem = problem or _problem(spec, tool, args)
    if spec is None or problem:
        return _record_unsent(call, problem)
    if claim(call, lease_s=claims.lease_s(spec), ttl_s=claims.ttl_s()).won:
        execution = _execution(run, call, spec, fence=1, trace_id=trace_id)
        execution.run_attempts()
        return _recorded(execution)
    return _resume_held(run=run, spec=spec, key=key, trace_id=trace_id)


def _record_unsent(call: ToolCall, problem: str) -> ToolCall:
    """Nothing can be sent; the call is recorded so that the ticket shows why."""
    end(
        call,
        ToolCall.Status.FAILED,
        "fatal",
        ToolCall.Reason.INVALID_ARGS,
        problem,
        feedback.invalid_args(call.tool, problem),
    )
    # A worker that died after this insert, before the compensation was settled, is
    # resumed with the same round: its row is the answer.
    earlier = ToolCall.objects.filter(run=call.run, tool_call_id=call.tool_call_id).first()
    if earlier is not None:
        return earlier
    with transaction.atomic():
        call.save(force_insert=True)
        traces.sealed_save(call)
    traces.call_export(call=call)
    return call


def _resume_held(*, run: Run, spec: ToolSpec, key: str, trace_id: str) -> ToolCall | None:
    """The round's claim is held already: its answer when recorded, None while a live
    worker holds it, or the round resumed when its holder died mid-round."""
    held = claims.peek_with_call(key=key)
    if held is None:
        return None  # the claim vanished between our insert and our look: try later
    state, current = held
    current.run = run
    if state.state == "recorded":
        return current
    if not state.lease_expired:
        return None
    # Its holder died mid-round (a worker killed): take the claim over and resume.
    fence = claims.take_over(key=key, seen_fence=state.fence, lease_s=claims.lease_s(spec))
    if fence is None:
        return None
    execution = _execution(run, current, spec, fence=fence, trace_id=trace_id)
    execution.resume()
    return _recorded(execution)


def _recorded(execution: Execution) -> ToolCall | None:
    # Not recorded: our lease lapsed mid-round and another worker took the round over;
    # its outcome is the one that counts.
    return execution.call if record(execution, insert=False) else None


def _execution(run: Run, call: ToolCall, spec: ToolSpec, *, fence: int, trace_id: str) -> Execution:
    return Execution(
        call=call,
        spec=spec,
        budget=Budget(run, counted=False),
        fence=fence,
        trace_id=trace_id,
    )


def _problem(spec: ToolSpec | None, tool: str, args: dict[str, Any] | None) -> str:
    if spec is None:
        return f"undo tool {tool!r} is not in the catalog"
    return schema_problem(spec, args or {}) or ""
