"""The path of one call (DESIGN.md): args → key → dependencies → budget → claim →
attempts (timeout, classify, backoff) → reconcile unknown outcomes → record.

Every stage can end the call, and every ending is a recorded call with feedback. The
downstream is never called inside a transaction: the claim commits first, the result is
recorded after, under the claim's fencing token."""

from __future__ import annotations

import difflib
import time
import uuid
from contextlib import nullcontext
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Case, F, Q, Value, When
from django.utils import timezone
from jsonschema import Draft202012Validator, FormatChecker

from toolops import rows
from toolops.models import Attempt, Run, ToolCall, new_span_id
from toolops.tools import registry
from toolops.tools.spec import ToolSpec

from . import backoff, breaker, claims, feedback, store
from .canonical import ArgsError, canonical_json, digest, normalize, parse_args
from .classify import Verdict, classify
from .keys import client_reference, idempotency_key
from .reconcile import QueryResult, query_outcome
from .transport import send

Status = ToolCall.Status
Reason = ToolCall.Reason

# How long a request that lost the claim waits for the winner before answering
# `in_progress` (it also takes over a claim whose holder died, after the lease).
FOLLOWER_WAIT_S = 30.0
# An unknown outcome whose query failed is asked again by the worker from this delay on.
RECONCILE_FIRST_S = 5.0


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
class CallRequest:
    step_index: int
    tool: str
    args: Any
    tool_call_id: str | None = None
    depends_on: list[str] = field(default_factory=list)
    tokens: int = 0
    wait: float = 0.0


@dataclass
class CallAnswer:
    call: ToolCall
    replayed: bool


@dataclass
class Prepared:
    spec: ToolSpec | None
    args: dict[str, Any] | None
    digest: str
    canonical: bytes | None
    problem: str | None  # invalid args, for the model


_format_checker = FormatChecker()


@_format_checker.checks("decimal", raises=ValueError)
def _is_decimal(value: object) -> bool:
    if not isinstance(value, str):
        return True  # the "type" keyword judges non-strings
    from decimal import Decimal, InvalidOperation

    try:
        return Decimal(value).is_finite()
    except InvalidOperation:
        raise ValueError(f"{value!r} is not a decimal number") from None


def write_key(
    *, agent_id: int, run_id: str, request: CallRequest, prepared: Prepared
) -> str | None:
    """The idempotency key of a write that will be claimed; None for anything else.

    `sha256(run : step_index : tool : canonical_args)`, the run named by its agent and
    run_id: two agents may both call a run `r-1`, and must never share keys."""
    spec = prepared.spec
    if spec is None or spec.is_read or prepared.problem is not None:
        return None
    assert prepared.canonical is not None
    return idempotency_key(
        run_id=f"{agent_id}/{run_id}", step_index=request.step_index, tool=spec.name,
        canonical_args=prepared.canonical,
    )  # fmt: skip


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
        call_id=f"c-{uuid.uuid4().hex}",
        run=run,
        tool_call_id=request.tool_call_id or f"tc-{uuid.uuid4().hex[:16]}",
        step_index=request.step_index,
        tool=request.tool,
        args=prepared.args if prepared.args is not None else None,
        args_digest=prepared.digest,
        depends_on=list(request.depends_on),
        tokens=request.tokens,
        status=Status.IN_PROGRESS,
    )
    spec = prepared.spec
    tokens = _Tokens(run, request.tokens)

    if spec is None:
        close = difflib.get_close_matches(request.tool, registry.names(), n=3, cutoff=0.5)
        _end(call, Status.FAILED, "fatal", Reason.UNKNOWN_TOOL, f"unknown tool {request.tool!r}",
             feedback.unknown_tool(request.tool, close))  # fmt: skip
        return _record_unexecuted(call, tokens)
    if prepared.problem is not None:
        _end(call, Status.FAILED, "fatal", Reason.INVALID_ARGS, prepared.problem,
             feedback.invalid_args(spec.name, prepared.problem))  # fmt: skip
        return _record_unexecuted(call, tokens)
    if dependency_failures:
        message = f"depends on {', '.join(dependency_failures)}"
        _end(call, Status.SKIPPED, "fatal", Reason.DEPENDENCY_FAILED, message,
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
        execution = _Execution(run=run, call=call, spec=spec, tokens=tokens, fence=None)
        execution.run_attempts()
        return execution.record(insert=True, request=request)

    try:
        won = store.claim_with_call(call, lease_s=_lease_s(spec), ttl_s=_ttl_s())
    except IntegrityError as exc:
        if not _is_tool_call_id_clash(exc):
            raise
        # Another request with this tool_call_id but other args got in first.
        existing = _by_tool_call_id(run, request)
        return _answer_existing(existing, request, prepared.digest, spec)
    if not won:
        # A replay: it counts no tokens.
        return _follow(run=run, spec=spec, key=call.idempotency_key, wait=request.wait)
    execution = _Execution(run=run, call=call, spec=spec, tokens=tokens, fence=1)
    if tokens.charge_now():
        _end_over_tokens(call)
    else:
        execution.run_attempts()
    return execution.record(insert=False, request=request)


def _end_over_tokens(call: ToolCall) -> None:
    what = f"max_tokens {call.run.max_tokens} exceeded"
    _end(call, Status.FAILED, "fatal", Reason.BUDGET_EXHAUSTED, what,
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


def prepare(request: CallRequest) -> Prepared:
    """The request's tool, args (as sent, made to fit the schema) and canonical form.
    Needs no database, so the API can make the key before it looks the run up."""
    spec = registry.get(request.tool, include_internal=False)
    try:
        raw = parse_args(request.args)
    except ArgsError as exc:
        text = request.args if isinstance(request.args, str) else repr(request.args)
        return Prepared(spec, None, digest(text.encode()), None, exc.message)
    schema = spec.params_schema if spec else None
    # The tool receives the args as sent (made to fit the schema); the key is made from
    # their canonical form, so model jitter does not change it.
    args = normalize(raw, schema, canonical=False)
    try:
        canonical = canonical_json(normalize(raw, schema))
    except ArgsError as exc:
        return Prepared(spec, args, digest(repr(args).encode()), None, exc.message)
    problem = _schema_problem(spec, args) if spec else None
    return Prepared(spec, args, digest(canonical), canonical, problem)


def _schema_problem(spec: ToolSpec, args: dict[str, Any]) -> str | None:
    validator = Draft202012Validator(spec.params_schema, format_checker=_format_checker)
    errors = sorted(validator.iter_errors(args), key=lambda e: list(e.absolute_path))
    if not errors:
        return None
    first = errors[0]
    where = ".".join(str(p) for p in first.absolute_path)
    message = first.message
    if first.validator == "required":
        return message  # "'qty' is a required property" names the field already
    if first.validator == "additionalProperties":
        return message
    return f"field {where!r}: {message}" if where else message


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
    """We lost the claim: wait for the winner's result, or take over a dead winner's claim."""
    deadline = time.monotonic() + max(wait, FOLLOWER_WAIT_S)
    pause = 0.005
    while True:
        found = claims.peek_with_call(key=key)
        if found is None:  # purged between our claim and now: vanishingly rare
            raise ToolCallConflict("the idempotency record vanished; send the call again")
        state, call = found
        call.run = run  # the key is the run's: the call is in this run
        if state.state == "recorded":
            return CallAnswer(call, replayed=True)
        if state.lease_expired:
            fence = claims.take_over(key=key, seen_fence=state.fence, lease_s=_lease_s(spec))
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
    spec = registry.get(call.tool)
    if state.state != "claimed" or not state.lease_expired or spec is None:
        return None
    fence = claims.take_over(key=key, seen_fence=state.fence, lease_s=_lease_s(spec))
    if fence is None:
        return None
    return _recover(call=call, spec=spec, fence=fence)


def _recover(*, call: ToolCall, spec: ToolSpec, fence: int) -> ToolCall:
    """The claim's holder died between claim and record. Never re-send an unsafe write
    blindly: ask its query tool first, or leave the outcome unknown for a person."""
    execution = _Execution(
        run=call.run, call=call, spec=spec, tokens=_Tokens(call.run, 0), fence=fence
    )
    if spec.replay_safe:
        execution.run_attempts()
    elif spec.query is not None:
        found = execution.reconcile("the previous holder of this call stopped mid-request")
        if found is QueryResult.NOT_FOUND:
            execution.run_attempts()
    else:
        execution.settle_unknown("the previous holder of this call stopped mid-request")
    return execution.record(insert=False, request=None).call


def _lease_s(spec: ToolSpec) -> float:
    from django.conf import settings

    # The lease must outlive one attempt; each further attempt renews it.
    return max(settings.TOOLOPS_CLAIM_LEASE_S, spec.timeout_s + 1.0)


def _ttl_s() -> float:
    from django.conf import settings

    return settings.TOOLOPS_IDEMPOTENCY_TTL_S


def _end(
    call: ToolCall, status: str, error_class: str, reason: str, message: str, text: str
) -> None:
    call.status = status
    call.error_class = error_class
    call.error_reason = reason
    call.error_message = message[:2000]
    call.feedback = text
    call.finished_at = timezone.now()


class _Tokens:
    """A call's tokens count once, when the call is accepted. Against a run with a token
    limit they are counted up front (the limit decides whether the call runs); otherwise
    they ride along with the call's final write."""

    def __init__(self, run: Run, tokens: int) -> None:
        self.run = run
        self.tokens = tokens
        self.pending = tokens

    def charge_now(self) -> bool:
        """Count the tokens before executing, against a token limit; True when they take
        the run past it (the call is counted, but not executed)."""
        run = self.run
        if not self.pending or run.max_tokens is None:
            return False
        Run.objects.filter(pk=run.pk).update(tokens_used=F("tokens_used") + self.pending)
        run.refresh_from_db(fields=["tokens_used", "attempts_used", "status"])
        self.pending = 0
        return run.tokens_used > run.max_tokens


def _record_unexecuted(call: ToolCall, tokens: _Tokens) -> CallAnswer:
    try:
        with transaction.atomic():
            rows.insert([call])
            _charge_run(call.run, attempts=0, tokens=tokens.pending)
    except IntegrityError as exc:
        if not _is_tool_call_id_clash(exc):
            raise
        existing = ToolCall.objects.get(run=call.run, tool_call_id=call.tool_call_id)
        if existing.args_digest != call.args_digest or existing.tool != call.tool:
            raise ToolCallConflict(f"tool_call_id {call.tool_call_id!r} is already used") from None
        return CallAnswer(existing, replayed=True)
    return CallAnswer(call, replayed=False)


def _charge_run(run: Run, *, attempts: int, tokens: int) -> None:
    """Add usage and, in the same statement, end the run the moment a limit is reached."""
    if not run.has_limits:
        return
    limit_reached = Q(max_attempts__isnull=False, max_attempts__lte=F("attempts_used") + attempts)
    limit_reached |= Q(max_tokens__isnull=False, max_tokens__lte=F("tokens_used") + tokens)
    Run.objects.filter(pk=run.pk).update(
        attempts_used=F("attempts_used") + attempts,
        tokens_used=F("tokens_used") + tokens,
        status=Case(
            When(
                Q(status=Run.Status.RUNNING) & limit_reached,
                then=Value(Run.Status.BUDGET_EXHAUSTED),
            ),
            default=F("status"),
        ),
    )


class _Execution:
    """The attempts of one call and their recording."""

    def __init__(
        self, *, run: Run, call: ToolCall, spec: ToolSpec, tokens: _Tokens, fence: int | None
    ) -> None:
        self.run = run
        self.call = call
        self.spec = spec
        self.tokens = tokens
        self.fence = fence
        self.rows: list[Attempt] = []
        self.unreserved_attempts = 0  # attempts not yet added to the run's usage
        self.lost_claim = False

    # -- attempts ---------------------------------------------------------------------

    def run_attempts(self) -> None:
        spec, call = self.spec, self.call
        if spec.query_before_write and spec.query is not None and call.attempts == 0:
            # Level 2 of DESIGN.md's fallbacks: look before writing. A failed look does not
            # stop the write — the downstream's unique index is the backstop.
            outcome, found, looks = query_outcome(spec, call, self.run)
            self.rows.extend(looks)
            if outcome is QueryResult.FOUND:
                self._succeeded(found, text=feedback.already_done(spec.name, spec.query.tool))
                return
        last_message = ""
        waited = 0.0
        while True:
            if call.attempts >= spec.max_attempts:
                self._exhausted(last_message)
                return
            if call.attempts > 0 and self.fence is not None and not self._renew():
                self.lost_claim = True
                return
            # The first attempt may use the breaker state read along with the run.
            known = getattr(self.run, "breaker_state", breaker.NOT_READ)
            self.run.breaker_state = breaker.NOT_READ  # later attempts read afresh
            admission = breaker.admit(spec, known)
            if not admission.allowed:
                self._circuit_open(admission.available_at)
                return
            if not self._reserve_attempt():
                what = f"max_attempts {self.run.max_attempts} reached"
                message = f"{what}; {last_message}".strip("; ")
                _end(call, Status.FAILED, "retry", Reason.BUDGET_EXHAUSTED, message,
                     feedback.budget_exhausted(what))  # fmt: skip
                return
            outcome, row = self._attempt(waited)
            row.health = breaker.health_of(outcome)
            breaker.report(spec, admission, row.health)
            verdict = classify(outcome, replay_safe=spec.replay_safe)
            row.outcome = verdict.verdict.value
            row.reason = verdict.reason
            last_message = outcome.message
            if verdict.is_ok:
                self._succeeded(outcome.body)
                return
            if verdict.verdict is Verdict.FATAL:
                if verdict.reason == Reason.RESULT_INVALID:
                    _end(call, Status.DEGRADED, "fatal", Reason.RESULT_INVALID, outcome.message,
                         feedback.result_invalid(spec.name, outcome.message))  # fmt: skip
                else:
                    _end(call, Status.FAILED, "fatal", verdict.reason, outcome.message,
                         feedback.fatal(spec.name, outcome.message))  # fmt: skip
                return
            if verdict.verdict is Verdict.UNKNOWN:
                if spec.query is None:
                    self.settle_unknown(outcome.message, reason=verdict.reason)
                    return
                found = self.reconcile(outcome.message, reason=verdict.reason)
                if found is not QueryResult.NOT_FOUND:
                    return
                # Not found: the write provably did not take effect; retry it with the
                # same key and client_reference, within budget.
            if call.attempts >= spec.max_attempts:
                self._exhausted(last_message, reason=verdict.reason)
                return
            waited = backoff.delay(
                retry_number=call.attempts, base_s=spec.backoff_base_s, cap_s=spec.backoff_cap_s,
                retry_after=outcome.retry_after,
            )  # fmt: skip
            if self._past_deadline(waited):
                what = f"max_seconds {self.run.max_seconds:g} reached"
                _end(call, Status.FAILED, "retry", Reason.BUDGET_EXHAUSTED,
                     f"{what}; {last_message}", feedback.budget_exhausted(what))  # fmt: skip
                return
            time.sleep(waited)

    def _attempt(self, waited: float) -> tuple[Any, Attempt]:
        call = self.call
        call.attempts += 1
        span_id = new_span_id()
        started = timezone.now()
        t0 = time.perf_counter()
        outcome = send(
            self.spec, call, self.run, call.args or {}, attempt=call.attempts, span_id=span_id
        )
        row = Attempt(
            call=call, tool=self.spec.name, number=call.attempts, span_id=span_id,
            started_at=started,
            duration_ms=(time.perf_counter() - t0) * 1000, waited_ms=waited * 1000,
            http_status=outcome.status, outcome="ok", error=outcome.message[:2000],
            downstream_request_id=outcome.request_id,
        )  # fmt: skip
        self.rows.append(row)
        return outcome, row

    def _renew(self) -> bool:
        """Extend our lease before another attempt; False: we lost the claim."""
        assert self.fence is not None
        return claims.renew(
            key=self.call.idempotency_key, fence=self.fence, lease_s=_lease_s(self.spec)
        )

    def _reserve_attempt(self) -> bool:
        run = self.run
        if run.max_attempts is None:
            self.unreserved_attempts += 1
            return True
        # The executor never starts an attempt that would go past max_attempts: reserve
        # it first, atomically, against every other call of the run.
        return (
            Run.objects.filter(pk=run.pk, attempts_used__lt=run.max_attempts).update(
                attempts_used=F("attempts_used") + 1
            )
            == 1
        )

    def _past_deadline(self, wait_s: float) -> bool:
        run = self.run
        return run.max_seconds is not None and run.seconds_used() + wait_s >= run.max_seconds

    def _succeeded(self, body: Any, text: str | None = None) -> None:
        call, spec = self.call, self.spec
        call.result = body
        if spec.result_schema is not None:
            errors = list(Draft202012Validator(spec.result_schema).iter_errors(body))
            if errors:
                first = errors[0]
                where = ".".join(str(p) for p in first.absolute_path)
                message = f"result {where + ': ' if where else ''}{first.message}"
                _end(call, Status.DEGRADED, "fatal", Reason.RESULT_INVALID, message,
                     feedback.result_invalid(spec.name, message))  # fmt: skip
                return
        _end(call, Status.SUCCEEDED, "", "", "", text or feedback.succeeded(spec.name))

    def _circuit_open(self, until: datetime | None) -> None:
        when = until.isoformat(timespec="seconds").replace("+00:00", "Z") if until else None
        message = f"circuit open{f' until {when}' if when else ''}"
        _end(self.call, Status.FAILED, "retry", Reason.CIRCUIT_OPEN, message,
             feedback.circuit_open(self.spec.name, when))  # fmt: skip

    def _exhausted(self, message: str, reason: str = Reason.DOWNSTREAM_ERROR) -> None:
        call, spec = self.call, self.spec
        if spec.allow_partial:
            _end(
                call,
                Status.DEGRADED,
                "retry",
                reason,
                message,
                feedback.partial(spec.name, message),
            )
        else:
            _end(call, Status.FAILED, "retry", reason, message,
                 feedback.exhausted(spec.name, call.attempts, message))  # fmt: skip

    def settle_unknown(self, message: str, reason: str = Reason.TIMEOUT) -> None:
        query = self.spec.query.tool if self.spec.query else None
        _end(self.call, Status.UNKNOWN, "unknown", reason, message,
             feedback.unknown(self.spec.name, message, query=query))  # fmt: skip
        self.call.finished_at = None  # not finished: it is being reconciled
        if self.spec.query is not None:
            self.call.next_reconcile_at = timezone.now() + timedelta(seconds=RECONCILE_FIRST_S)

    def reconcile(self, message: str, reason: str = Reason.TIMEOUT) -> QueryResult:
        """Ask the tool's query tool what became of the write (DESIGN.md "unknown")."""
        outcome, found, looks = query_outcome(self.spec, self.call, self.run)
        self.rows.extend(looks)
        if outcome is QueryResult.FOUND:
            assert self.spec.query is not None
            self._succeeded(found, text=feedback.reconciled(self.spec.name, self.spec.query.tool))
        elif outcome is QueryResult.FAILED:
            self.settle_unknown(message, reason=reason)
        return outcome

    # -- recording --------------------------------------------------------------------

    def record(self, *, insert: bool, request: CallRequest | None) -> CallAnswer:
        call = self.call
        fence = None if self.fence is None else (-1 if self.lost_claim else self.fence)
        try:
            # Counters live on the run row only for limited runs; then the result and the
            # usage are written in one transaction.
            with transaction.atomic() if self.run.has_limits else nullcontext():
                if insert:
                    store.insert_with_attempts(call, self.rows)
                    recorded = True
                else:
                    recorded = store.record_result(
                        call, self.rows, fence=fence, fields=_RESULT_FIELDS
                    )
                _charge_run(self.run, attempts=self.unreserved_attempts, tokens=self.tokens.pending)
        except IntegrityError as exc:
            # A read raced by another request with the same tool_call_id; anything else
            # is not ours to explain away.
            if request is None or not _is_tool_call_id_clash(exc):
                raise
            existing = _by_tool_call_id(self.run, request)
            return _answer_existing(existing, request, call.args_digest, self.spec)
        if not recorded:
            # Our lease ran out and someone else now holds this call: theirs is the answer.
            call.refresh_from_db()
            return CallAnswer(call, replayed=True)
        return CallAnswer(call, replayed=False)


_RESULT_FIELDS = [
    "status", "result", "error_class", "error_reason", "error_message", "feedback",
    "attempts", "finished_at", "next_reconcile_at",
]  # fmt: skip
