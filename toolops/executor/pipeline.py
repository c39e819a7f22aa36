"""The path of one call (DESIGN.md): args → key → dependencies → budget → claim →
attempts (timeout, classify, backoff) → reconcile unknown outcomes → record.

Every stage can end the call, and every ending is a recorded call with feedback. The
downstream is never called inside a transaction: the claim commits first, the result is
recorded after, under the claim's fencing token."""

from __future__ import annotations

import difflib
import time
from dataclasses import dataclass

from django.db import IntegrityError, transaction

from toolops import rows
from toolops.approvals import services as approval_services
from toolops.ids import new_call_id, new_tool_call_id
from toolops.models import Run, ToolCall
from toolops.tools import registry
from toolops.tools.spec import ToolSpec
from traces import services as traces

from . import budget, claims, feedback, store
from .budget import Tokens, charge_run
from .execution import Execution, end, lease_s, ttl_s
from .keys import client_reference, idempotency_key
from .prepare import CallRequest, Prepared, prepare, write_key

Status = ToolCall.Status
Reason = ToolCall.Reason

# A held call's claim outlives its approval by this much: the expiry task ends it first.
HOLD_LEASE_MARGIN_S = 300


class RunNotRunning(Exception):
    def __init__(self, run: Run) -> None:
        super().__init__(f"run {run.run_id} is {run.status}; it takes no more calls")
        self.run = run


class ToolCallConflict(Exception):
    pass


class BadCallRequest(Exception):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


@dataclass
class CallAnswer:
    call: ToolCall
    replayed: bool


def call_submit(*, run: Run, request: CallRequest, prepared: Prepared | None = None) -> CallAnswer:
    _ensure_running(run)
    prepared = prepared or prepare(request)

    if request.tool_call_id:
        existing = _existing_call(run, request.tool_call_id)
        if existing is not None:
            return _answer_existing(existing, request, prepared.digest, prepared.spec)

    key = write_key(agent_id=run.agent_id, run_id=run.run_id, request=request, prepared=prepared)
    hit = getattr(run, "claim_hit", None)
    if key is not None and hit is not None:
        # A replay, seen by the run's own query: answered without another statement.
        state, recorded = hit
        recorded.run = run
        if state.state == "recorded":
            return CallAnswer(recorded, replayed=True)
        assert prepared.spec is not None
        return _follow(run=run, spec=prepared.spec, key=key, wait=request.wait)

    dependency_failures = _check_dependencies(run, request.depends_on)

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
    spec = prepared.spec
    # Stored, shown and exported redacted; the full args stay in memory for the downstream
    # and are sealed in the vault with the call row when anything was redacted.
    traces.args_seal(call, spec=spec)
    tokens = Tokens(run, request.tokens)

    if spec is None:
        close = difflib.get_close_matches(request.tool, registry.names(), n=3, cutoff=0.5)
        end(call, Status.FAILED, "fatal", Reason.UNKNOWN_TOOL, f"unknown tool {request.tool!r}",
             feedback.unknown_tool(request.tool, close))  # fmt: skip
        return _record_unexecuted(call, tokens)
    if prepared.problem is not None:
        end(call, Status.FAILED, "fatal", Reason.INVALID_ARGS, prepared.problem,
             feedback.invalid_args(spec.name, prepared.problem))  # fmt: skip
        return _record_unexecuted(call, tokens)
    if dependency_failures:
        message = f"depends on {', '.join(dependency_failures)}"
        end(call, Status.SKIPPED, "fatal", Reason.DEPENDENCY_FAILED, message,
             feedback.dependency_failed(dependency_failures))  # fmt: skip
        return _record_unexecuted(call, tokens)

    assert prepared.canonical is not None and prepared.args is not None
    # Reads carry a key too (API.md: Idempotency-Key is always sent), made the same way.
    call.idempotency_key = key or idempotency_key(
        run_id=f"{run.agent_id}/{run.run_id}", step_index=request.step_index, tool=spec.name,
        canonical_args=prepared.canonical,
    )  # fmt: skip
    call.client_reference = client_reference(call.idempotency_key)

    if spec.is_read:
        # Reads pass through: no claim, and the call row is written once, at the end.
        if tokens.charge_now():
            _end_over_tokens(call)
            return _record_unexecuted(call, tokens)
        execution = Execution(run=run, call=call, spec=spec, tokens=tokens, fence=None)
        execution.run_attempts()
        return _record(execution, insert=True, request=request)

    # The approval gate: one question, and nothing read or written when the answer is no.
    need = approval_services.approval_needed(run=run, spec=spec, args_digest=call.args_digest)
    if need is not None and not _takes_run_past_max_tokens(run, request.tokens):
        return _hold(run=run, call=call, spec=spec, need=need, request=request)

    try:
        # A limited run's first attempt and the call's tokens are charged by the claim.
        won, charged = store.claim_and_charge(
            call, lease_s=lease_s(spec), ttl_s=ttl_s(),
            charge=budget.upfront(run, tokens=request.tokens),
        )  # fmt: skip
    except IntegrityError as exc:
        if not _is_tool_call_id_clash(exc):
            raise
        # Another request with this tool_call_id but other args got in first.
        existing = _by_tool_call_id(run, request)
        return _answer_existing(existing, request, prepared.digest, spec)
    if not won:
        # A replay: it counts no tokens.
        return _follow(run=run, spec=spec, key=call.idempotency_key, wait=request.wait)
    traces.run_changed(run_pk=run.pk)  # in flight: its run's open pages show it now
    execution = Execution(run=run, call=call, spec=spec, tokens=tokens, fence=1)
    if charged is not None:
        tokens.pending = 0
        execution.prereserved = True
        execution.limit_reached = charged
        execution.run_attempts()
    elif tokens.charge_now():  # the budget did not fit: tell which limit, the long way
        _end_over_tokens(call)
    else:
        execution.run_attempts()
    return _record(execution, insert=False, request=request)


def _record(execution: Execution, *, insert: bool, request: CallRequest) -> CallAnswer:
    try:
        recorded = execution.record(insert=insert)
    except IntegrityError as exc:
        # A read raced by another request with the same tool_call_id; anything else
        # is not ours to explain away.
        if not _is_tool_call_id_clash(exc):
            raise
        existing = _by_tool_call_id(execution.run, request)
        return _answer_existing(existing, request, execution.call.args_digest, execution.spec)
    # Not recorded: our lease ran out and someone else holds this call; theirs is the answer.
    return CallAnswer(execution.call, replayed=not recorded)


class _LostClaim(Exception):
    pass


def _hold(
    *, run: Run, call: ToolCall, spec: ToolSpec, need: approval_services.Need, request: CallRequest
) -> CallAnswer:
    """Hold a call for a person: its key is claimed (so the same request again is the
    same pending call, never a second approval) and its approval opened, in one
    transaction; nothing is sent. The claim's lease outlives the approval, so no sweep
    takes it over while a person decides."""
    call.status = Status.PENDING_APPROVAL
    call.feedback = feedback.pending_approval(spec.name, need.reason)
    try:
        with transaction.atomic():
            # Locked, and still running: an abort or complete committed since this request
            # read the run would otherwise miss a call held after it.
            if (
                not Run.objects.select_for_update()
                .filter(pk=run.pk, status=Run.Status.RUNNING)
                .exists()
            ):
                run.refresh_from_db(fields=["status"])
                raise RunNotRunning(run)
            call.approval = approval_services.approval_open(run=run, call=call, need=need)
            if not store.claim_with_call(
                call, lease_s=need.ttl_s + HOLD_LEASE_MARGIN_S, ttl_s=ttl_s()
            ):
                raise _LostClaim
            # The call is accepted: its tokens count now, once.
            charge_run(run, attempts=0, tokens=request.tokens)
    except _LostClaim:
        return _follow(run=run, spec=spec, key=call.idempotency_key, wait=request.wait)
    except IntegrityError as exc:
        if not _is_tool_call_id_clash(exc):
            raise
        existing = _by_tool_call_id(run, request)
        return _answer_existing(existing, request, call.args_digest, spec)
    traces.run_changed(run_pk=run.pk)
    return CallAnswer(call, replayed=False)


def _takes_run_past_max_tokens(run: Run, tokens: int) -> bool:
    """Such a call is counted but never run (API.md): it takes the ordinary path, which
    ends it `budget_exhausted`, rather than waiting for a person first."""
    return bool(tokens) and run.max_tokens is not None and run.tokens_used + tokens > run.max_tokens


def _end_over_tokens(call: ToolCall) -> None:
    what = f"max_tokens {call.run.max_tokens} exceeded"
    end(call, Status.FAILED, "fatal", Reason.BUDGET_EXHAUSTED, what,
         feedback.budget_exhausted(what))  # fmt: skip


def run_check_deadline(run: Run) -> None:
    """A run past max_seconds is budget_exhausted the moment anyone looks at it."""
    limited = run.status == Run.Status.RUNNING and run.max_seconds is not None
    if limited and run.seconds_used() >= run.max_seconds:
        _exhaust_run(run)


def _ensure_running(run: Run) -> None:
    run_check_deadline(run)
    if run.status != Run.Status.RUNNING:
        raise RunNotRunning(run)


def _exhaust_run(run: Run) -> None:
    Run.objects.filter(pk=run.pk, status=Run.Status.RUNNING).update(
        status=Run.Status.BUDGET_EXHAUSTED
    )
    run.refresh_from_db(fields=["status"])


def _existing_call(run: Run, tool_call_id: str) -> ToolCall | None:
    # The selector may have looked this up in the same query as the run.
    if hasattr(run, "existing_call_pk"):
        pk = run.existing_call_pk
        return None if pk is None else ToolCall.objects.select_related("run").get(pk=pk)
    return ToolCall.objects.select_related("run").filter(run=run, tool_call_id=tool_call_id).first()


def _check_dependencies(run: Run, ids: list[str]) -> list[str]:
    """The depends_on ids that did not succeed; an id unknown in this run is a 400."""
    if not ids:
        return []
    statuses = dict(
        ToolCall.objects.filter(run=run, tool_call_id__in=ids).values_list("tool_call_id", "status")
    )
    missing = [i for i in ids if i not in statuses]
    if missing:
        raise BadCallRequest(
            "depends_on", f"unknown tool_call_id in this run: {', '.join(missing)}"
        )
    return [i for i in ids if statuses[i] not in ToolCall.USABLE]


def _is_tool_call_id_clash(exc: IntegrityError) -> bool:
    # PostgreSQL names the constraint; SQLite names the columns.
    text = str(exc)
    return "call_run_tool_call_id" in text or "toolops_toolcall.tool_call_id" in text


def _by_tool_call_id(run: Run, request: CallRequest) -> ToolCall:
    return ToolCall.objects.get(run=run, tool_call_id=request.tool_call_id)


def _answer_existing(
    existing: ToolCall, request: CallRequest, args_digest: str, spec: ToolSpec | None
) -> CallAnswer:
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
        return _follow(run=existing.run, spec=spec, key=existing.idempotency_key, wait=request.wait)
    return CallAnswer(existing, replayed=True)


def _follow(*, run: Run, spec: ToolSpec, key: str, wait: float) -> CallAnswer:
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
            fence = claims.take_over(key=key, seen_fence=state.fence, lease_s=lease_s(spec))
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
    fence = claims.take_over(key=key, seen_fence=state.fence, lease_s=lease_s(spec))
    if fence is None:
        return None
    return _recover(call=call, spec=spec, fence=fence)


def _recover(*, call: ToolCall, spec: ToolSpec, fence: int) -> ToolCall:
    """The claim's holder died between claim and record. Never re-send an unsafe write
    blindly: ask its query tool first, or leave the outcome unknown for a person."""
    execution = Execution(
        run=call.run, call=call, spec=spec, tokens=Tokens(call.run, 0), fence=fence
    )
    execution.resume()
    execution.record(insert=False)
    return execution.call


def _record_unexecuted(call: ToolCall, tokens: Tokens) -> CallAnswer:
    try:
        with transaction.atomic():
            rows.insert([call])
            traces.sealed_save(call)
            charge_run(call.run, attempts=0, tokens=tokens.pending)
    except IntegrityError as exc:
        if not _is_tool_call_id_clash(exc):
            raise
        existing = ToolCall.objects.get(run=call.run, tool_call_id=call.tool_call_id)
        if existing.args_digest != call.args_digest or existing.tool != call.tool:
            raise ToolCallConflict(f"tool_call_id {call.tool_call_id!r} is already used") from None
        return CallAnswer(existing, replayed=True)
    traces.run_changed(run_pk=call.run_id)
    traces.call_export(call=call)
    return CallAnswer(call, replayed=False)
