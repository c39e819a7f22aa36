"""The attempts of one call and their recording: the part of the path that talks to the
downstream (DESIGN.md): breaker → budget → attempt → classify → backoff, reconcile an
unknown outcome, then record the result with its attempts — and, for a successful
compensable write, its compensation, in the same statement.

Used by the agent's calls (pipeline.py) and by the worker's undo calls (undo.py)."""

from __future__ import annotations

import time
from contextlib import nullcontext
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from compensations import services as compensation_services
from toolops.models import Attempt, Run, ToolCall, new_span_id
from toolops.tools.spec import ToolSpec
from traces import services as traces

from . import backoff, breaker, budget, claims, feedback, store
from .budget import Tokens
from .classify import Failure, Verdict, classify
from .prepare import validator
from .reconcile import QueryResult, query_outcome
from .transport import send

Status = ToolCall.Status
Reason = ToolCall.Reason

# An unknown outcome whose query failed is asked again by the worker from this delay on.
RECONCILE_FIRST_S = 5.0


def lease_s(spec: ToolSpec) -> float:
    from django.conf import settings

    # The lease must outlive one attempt; each further attempt renews it.
    return max(settings.TOOLOPS_CLAIM_LEASE_S, spec.timeout_s + 1.0)


def ttl_s() -> float:
    from django.conf import settings

    return settings.TOOLOPS_IDEMPOTENCY_TTL_S


def end(
    call: ToolCall, status: str, error_class: str, reason: str, message: str, text: str
) -> None:
    call.status = status
    call.error_class = error_class
    call.error_reason = reason
    # A downstream's error (or the schema's verdict) may quote the args back.
    call.error_message = traces.redact_text(message, call=call)[:2000]
    call.feedback = traces.redact_text(text, call=call)
    call.finished_at = timezone.now()


class Execution:
    """The attempts of one call and their recording.

    `undo=True` for the worker's compensation calls: they are outside the run's budget
    (an exhausted run must still be undone), their spans start a trace of their own, and
    their waits grow on every retry (one worker, no herd to spread)."""

    def __init__(
        self, *, run: Run, call: ToolCall, spec: ToolSpec, tokens: Tokens, fence: int | None,
        undo: bool = False, trace_id: str | None = None,
    ) -> None:  # fmt: skip
        self.run = run
        self.call = call
        self.spec = spec
        self.tokens = tokens
        self.fence = fence
        self.budgeted = not undo
        self.trace_id = trace_id or run.trace_id
        self.rows: list[Attempt] = []
        self.unreserved_attempts = 0  # attempts not yet added to the run's usage
        # The first attempt was reserved by the claim statement (budget.upfront); given
        # back at the record if it was never made.
        self.prereserved = False
        # Whether the record must settle the run's usage: a limit was reached, or a
        # reservation was made outside the claim (None: not yet known, settle).
        self.limit_reached: bool | None = None
        self.lost_claim = False
        self.resumed = False  # taken over from a holder that died

    # -- attempts ---------------------------------------------------------------------

    def run_attempts(self) -> None:
        spec, call = self.spec, self.call
        if not self._args_ready():
            return
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
                end(call, Status.FAILED, "retry", Reason.BUDGET_EXHAUSTED, message,
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
                if outcome.failure is Failure.TOO_LARGE:
                    self._too_large(outcome.message)
                elif verdict.reason == Reason.RESULT_INVALID:
                    end(call, Status.DEGRADED, "fatal", Reason.RESULT_INVALID, outcome.message,
                         feedback.result_invalid(spec.name, outcome.message))  # fmt: skip
                else:
                    end(call, Status.FAILED, "fatal", verdict.reason, outcome.message,
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
                retry_after=outcome.retry_after, jitter="full" if self.budgeted else "growing",
            )  # fmt: skip
            # A long wait (an undo's backoff reaches 30 s) must not let the lease lapse and
            # invite a takeover while we sleep.
            long_wait = waited + spec.timeout_s + 1 > lease_s(spec)
            if (
                self.fence is not None
                and long_wait
                and not claims.renew(
                    key=call.idempotency_key, fence=self.fence, lease_s=lease_s(spec) + waited
                )
            ):
                self.lost_claim = True
                return
            if self._past_deadline(waited):
                what = f"max_seconds {self.run.max_seconds:g} reached"
                end(call, Status.FAILED, "retry", Reason.BUDGET_EXHAUSTED,
                     f"{what}; {last_message}", feedback.budget_exhausted(what))  # fmt: skip
                return
            time.sleep(waited)

    def resume(self) -> None:
        """Attempts for a call whose claim we took over from a holder that died between
        claim and record. Never re-send an unsafe write blindly: ask its query tool first,
        or leave the outcome unknown for a person."""
        self.resumed = True
        if self.spec.replay_safe:
            self.run_attempts()
        elif self.spec.query is not None:
            found = self.reconcile("the previous holder of this call stopped mid-request")
            if found is QueryResult.NOT_FOUND:
                self.run_attempts()
        else:
            self.settle_unknown("the previous holder of this call stopped mid-request")

    def _args_ready(self) -> bool:
        """Open the full args before anything is sent. A call read back from the database
        (approved, taken over, an undo resumed) whose sealed args cannot be decrypted ends
        `failed` with nothing sent: its stored args hold placeholders, which a downstream
        would act on as values."""
        try:
            traces.args_open(self.call)
        except traces.SealedArgsUnavailable as exc:
            message = f"{exc.reason}; nothing was sent"
            if self.resumed:
                message += " (its previous holder may have sent it before it stopped)"
            end(self.call, Status.FAILED, "fatal", Reason.INVALID_ARGS, message,
                 feedback.args_unavailable(self.spec.name))  # fmt: skip
            return False
        return True

    def _attempt(self, waited: float) -> tuple[Any, Attempt]:
        call = self.call
        call.attempts += 1
        span_id = new_span_id()
        started = timezone.now()
        t0 = time.perf_counter()
        outcome = send(
            self.spec, call, self.run, traces.args_open(call) or {}, attempt=call.attempts,
            span_id=span_id,
            trace_id=self.trace_id,
        )  # fmt: skip
        row = Attempt(
            call=call, tool=self.spec.name, number=call.attempts, span_id=span_id,
            started_at=started,
            duration_ms=(time.perf_counter() - t0) * 1000, waited_ms=waited * 1000,
            http_status=outcome.status, outcome="ok",
            error=traces.redact_text(outcome.message, call=call)[:2000],
            downstream_request_id=outcome.request_id,
        )  # fmt: skip
        self.rows.append(row)
        return outcome, row

    def _renew(self) -> bool:
        """Extend our lease before another attempt; False: we lost the claim."""
        assert self.fence is not None
        return claims.renew(
            key=self.call.idempotency_key, fence=self.fence, lease_s=lease_s(self.spec)
        )

    def _reserve_attempt(self) -> bool:
        run = self.run
        if self.prereserved:
            self.prereserved = False
            return True
        if run.max_attempts is None or not self.budgeted:
            self.unreserved_attempts += 1
            return True
        self.limit_reached = None  # reserved here: the record settles the run's usage
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
        return (
            self.budgeted
            and run.max_seconds is not None
            and run.seconds_used() + wait_s >= run.max_seconds
        )

    def _succeeded(self, body: Any, text: str | None = None) -> None:
        call, spec = self.call, self.spec
        # Stored redacted (the full result sealed in `result_sealed`); the agent gets it whole.
        traces.result_seal(call, body, spec=spec)
        if spec.result_schema is not None:
            errors = list(validator(spec.result_schema, formats=False).iter_errors(body))
            if errors:
                first = errors[0]
                where = ".".join(str(p) for p in first.absolute_path)
                message = f"result {where + ': ' if where else ''}{first.message}"
                end(call, Status.DEGRADED, "fatal", Reason.RESULT_INVALID, message,
                     feedback.result_invalid(spec.name, message))  # fmt: skip
                return
        end(call, Status.SUCCEEDED, "", "", "", text or feedback.succeeded(spec.name))

    def _too_large(self, message: str) -> None:
        """A 2xx answer past TOOLOPS_DOWNSTREAM_MAX_BYTES, left unread. A read ends
        `failed`: nothing changed and nothing usable came back. A write took effect, so it
        ends `degraded` with no result — `failed` would invite the model to send it again —
        and its undo is registered as for any write that was done."""
        call, name = self.call, self.spec.name
        if self.spec.is_read:
            end(call, Status.FAILED, "fatal", Reason.DOWNSTREAM_ERROR, message,
                feedback.too_large(name, message, done=False))  # fmt: skip
        else:
            message = f"{message}; the write took effect"
            end(call, Status.DEGRADED, "fatal", Reason.DOWNSTREAM_ERROR, message,
                feedback.too_large(name, message, done=True))  # fmt: skip

    def _circuit_open(self, until: datetime | None) -> None:
        when = until.isoformat(timespec="seconds").replace("+00:00", "Z") if until else None
        message = f"circuit open{f' until {when}' if when else ''}"
        end(self.call, Status.FAILED, "retry", Reason.CIRCUIT_OPEN, message,
             feedback.circuit_open(self.spec.name, when))  # fmt: skip

    def _exhausted(self, message: str, reason: str = Reason.DOWNSTREAM_ERROR) -> None:
        call, spec = self.call, self.spec
        if spec.allow_partial:
            end(
                call,
                Status.DEGRADED,
                "retry",
                reason,
                message,
                feedback.partial(spec.name, message),
            )
        else:
            end(call, Status.FAILED, "retry", reason, message,
                 feedback.exhausted(spec.name, call.attempts, message))  # fmt: skip

    def settle_unknown(self, message: str, reason: str = Reason.TIMEOUT) -> None:
        query = self.spec.query.tool if self.spec.query else None
        end(self.call, Status.UNKNOWN, "unknown", reason, message,
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

    def record(self, *, insert: bool) -> bool:
        """Record the result with its attempts; False when our lease ran out and someone
        else now holds this call (its answer is theirs: `self.call` is re-read).

        A successful write that has an undo registers it in the same statement (never a
        success without its undo). Raises IntegrityError when a read's insert clashes
        with another call's tool_call_id."""
        call = self.call
        fence = None if self.fence is None else (-1 if self.lost_claim else self.fence)
        undo = self._compensation()
        also = [undo] if undo is not None and not undo.problem else []
        # Counters live on the run row only for limited runs; the result's own statement
        # settles them (budget.py).
        charge = None
        if self.budgeted and self.run.has_limits:
            # A first attempt reserved by the claim but never made is given back.
            attempts = self.unreserved_attempts - (1 if self.prereserved else 0)
            if attempts or self.tokens.pending or self.limit_reached is not False:
                charge = budget.charge_sql(self.run, attempts=attempts, tokens=self.tokens.pending)
        # A compensation that cannot be built and the ticket it opens are written in one
        # transaction: a rare path, where statements do not count.
        with transaction.atomic() if undo is not None and undo.problem else nullcontext():
            if insert:
                store.insert_with_attempts(call, self.rows, charge=charge)
                recorded = True
            else:
                recorded = store.record_result(
                    call, self.rows, fence=fence, fields=RESULT_FIELDS, also=also, charge=charge
                )
            if recorded and undo is not None and undo.problem:
                compensation_services.compensation_save_unmappable(compensation=undo)
        if not recorded:
            call.refresh_from_db()
            # Our attempts happened and landed; the call span is its new holder's.
            traces.attempts_export(call=call, attempts=self.rows)
        else:
            traces.call_export(call=call, attempts=self.rows)
        traces.run_changed(run_pk=self.run.pk)
        return recorded

    def _compensation(self) -> Any:
        """The unsaved compensation a successful write registers, or None."""
        if not self.budgeted or self.call.status not in ToolCall.USABLE or self.spec.is_read:
            return None
        return compensation_services.compensation_build(call=self.call, spec=self.spec)


RESULT_FIELDS = [
    "status", "result", "error_class", "error_reason", "error_message", "feedback",
    "attempts", "finished_at", "next_reconcile_at", "result_sealed",
]  # fmt: skip
