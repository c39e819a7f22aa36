"""The attempts of one call: the part of the path that talks to the downstream
(DESIGN.md): breaker → budget → attempt → classify → backoff, and an unknown outcome
reconciled by asking the tool's query tool. Each ending is set on the call (`end`); the
result is recorded after, by record.py.

Used by the agent's calls (pipeline.py), approved calls (approved.py), recovered claims
(replay.py) and the worker's undo calls (undo.py)."""

from __future__ import annotations

import time
from datetime import datetime, timedelta
from typing import Any

from django.db.models import F
from django.utils import timezone

from toolops.crash import crash_point
from toolops.models import Attempt, Run, ToolCall, new_span_id
from toolops.tools.outcome import Failure, Outcome
from toolops.tools.spec import ToolSpec
from traces import services as traces

from . import backoff, breaker, claims, feedback
from .budget import Tokens
from .classify import Classified, Verdict, classify
from .prepare import validator
from .reconcile import QueryResult, query_outcome
from .transport import send

Status = ToolCall.Status
Reason = ToolCall.Reason

# An unknown outcome whose query failed is asked again by the worker from this delay on.
RECONCILE_FIRST_S = 5.0


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
        self,
        *,
        run: Run,
        call: ToolCall,
        spec: ToolSpec,
        tokens: Tokens,
        fence: int | None,
        undo: bool = False,
        trace_id: str | None = None,
        breaker_state: tuple[object, ...] | None = None,
    ) -> None:
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
        # An attempt of a write went out and no answer says what became of it (a timeout,
        # a reset, a 502 after the commit): retried under its key, but if the retries end
        # without an answer the write may have been done (_maybe_done).
        self.maybe_done = False
        # The tool's breaker as read with the run (context.py), for the first attempt.
        self.breaker_state = breaker_state

    # -- attempts ---------------------------------------------------------------------

    def run_attempts(self) -> None:
        """Attempts until one ends the call: a result, a fatal failure, an unknown outcome,
        or a limit (the tool's attempts, the run's budget, the breaker, a lost claim)."""
        if not self._args_ready() or self._found_before_writing():
            return
        last_message, waited = "", 0.0
        while True:
            admission = self._admit(last_message)
            if admission is None:
                return
            outcome, row = self._attempt(waited)
            row.health = breaker.health_of(outcome)
            breaker.report(self.spec, admission, row.health)
            verdict = classify(outcome, replay_safe=self.spec.replay_safe)
            row.outcome, row.reason = verdict.verdict.value, verdict.reason
            if verdict.verdict is Verdict.RETRY and not self.spec.is_read:
                unsafe = classify(outcome, replay_safe=False).verdict is Verdict.UNKNOWN
                self.maybe_done = self.maybe_done or unsafe
            last_message = outcome.message
            if self._ended_by(outcome, verdict):
                return
            pause = self._pause_before_retry(outcome, verdict)
            if pause is None:
                return
            waited = pause
            time.sleep(waited)

    def _found_before_writing(self) -> bool:
        """Level 2 of DESIGN.md's fallbacks: look before writing. A failed look does not
        stop the write — the downstream's unique index is the backstop."""
        spec, call = self.spec, self.call
        if not (spec.query_before_write and spec.query is not None and call.attempts == 0):
            return False
        outcome, found, looks = query_outcome(spec, call, self.run)
        self.rows.extend(looks)
        if outcome is not QueryResult.FOUND:
            return False
        self._succeeded(found, text=feedback.already_done(spec.name, spec.query.tool))
        return True

    def _admit(self, last_message: str) -> breaker.Admission | None:
        """May another attempt go out? None, with the call ended, when it may not."""
        spec, call = self.spec, self.call
        if call.attempts >= spec.max_attempts:
            self._exhausted(last_message)
            return None
        if call.attempts > 0 and self.fence is not None and not self._renew():
            self.lost_claim = True
            return None
        # The first attempt may use the breaker state read along with the run.
        admission = breaker.admit(spec, self.breaker_state)
        self.breaker_state = None  # later attempts read it afresh
        if not admission.allowed:
            self._circuit_open(admission.available_at)
            return None
        if not self._reserve_attempt():
            what = f"max_attempts {self.run.max_attempts} reached"
            message = f"{what}; {last_message}".strip("; ")
            if self._maybe_done(message):
                return None
            end(
                call,
                Status.FAILED,
                "retry",
                Reason.BUDGET_EXHAUSTED,
                message,
                feedback.budget_exhausted(what),
            )
            return None
        return admission

    def _ended_by(self, outcome: Outcome, verdict: Classified) -> bool:
        """Does this attempt's outcome end the call? True once it is ended (a result, a
        fatal failure, an unknown outcome the query tool could not settle as not done)."""
        spec, call = self.spec, self.call
        if verdict.is_ok:
            self._succeeded(outcome.body)
            return True
        if verdict.verdict is Verdict.FATAL:
            if outcome.failure is Failure.TOO_LARGE:
                self._too_large(outcome.message)
            elif verdict.reason == Reason.RESULT_INVALID:
                end(
                    call,
                    Status.DEGRADED,
                    "fatal",
                    Reason.RESULT_INVALID,
                    outcome.message,
                    feedback.result_invalid(spec.name, outcome.message),
                )
            else:
                text = feedback.fatal(spec.name, outcome.message)
                if outcome.detail:  # the tool's own bug: its detail is for operators only
                    text = feedback.internal_error(spec.name)
                end(call, Status.FAILED, "fatal", verdict.reason, outcome.message, text)
            return True
        if verdict.verdict is Verdict.UNKNOWN:
            if spec.query is None:
                self.settle_unknown(outcome.message, reason=verdict.reason)
                return True
            # Not found: the write provably did not take effect; it is retried with the
            # same key and client_reference, within budget.
            return self.reconcile(outcome.message, reason=verdict.reason) is not (
                QueryResult.NOT_FOUND
            )
        return False

    def _pause_before_retry(self, outcome: Outcome, verdict: Classified) -> float | None:
        """The wait before the next attempt; None, with the call ended, when there is none:
        the tool's attempts are used up, the claim was lost, or the wait would take the
        run past its max_seconds."""
        spec, call = self.spec, self.call
        if call.attempts >= spec.max_attempts:
            self._exhausted(outcome.message, reason=verdict.reason)
            return None
        waited = backoff.delay(
            retry_number=call.attempts,
            base_s=spec.backoff_base_s,
            cap_s=spec.backoff_cap_s,
            retry_after=outcome.retry_after,
            jitter="full" if self.budgeted else "growing",
        )
        # A long wait (an undo's backoff reaches 30 s) must not let the lease lapse and
        # invite a takeover while we sleep.
        lease = claims.lease_s(spec)
        if (
            self.fence is not None
            and waited + spec.timeout_s + 1 > lease
            and not claims.renew(key=call.idempotency_key, fence=self.fence, lease_s=lease + waited)
        ):
            self.lost_claim = True
            return None
        if self._past_deadline(waited):
            what = f"max_seconds {self.run.max_seconds:g} reached"
            if self._maybe_done(f"{what}; {outcome.message}", verdict.reason):
                return None
            end(
                call,
                Status.FAILED,
                "retry",
                Reason.BUDGET_EXHAUSTED,
                f"{what}; {outcome.message}",
                feedback.budget_exhausted(what),
            )
            return None
        return waited

    def resume(self) -> None:
        """Attempts for a call whose claim we took over from a holder that died between
        claim and record. Never re-send an unsafe write blindly: ask its query tool first,
        or leave the outcome unknown for a person."""
        self.resumed = True
        # Its holder may have sent it: if the retries here stop short (the breaker, the
        # budget), a write is not `failed` but unknown, or settled by its query tool.
        self.maybe_done = not self.spec.is_read
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
            end(
                self.call,
                Status.FAILED,
                "fatal",
                Reason.INVALID_ARGS,
                message,
                feedback.args_unavailable(self.spec.name),
            )
            return False
        return True

    def _attempt(self, waited: float) -> tuple[Any, Attempt]:
        call = self.call
        call.attempts += 1
        span_id = new_span_id()
        started = timezone.now()
        t0 = time.perf_counter()
        outcome = send(
            self.spec,
            call,
            self.run,
            traces.args_open(call) or {},
            attempt=call.attempts,
            span_id=span_id,
            trace_id=self.trace_id,
        )
        crash_point("after-answer")  # fault tests: answered, and nothing of it recorded
        row = Attempt(
            call=call,
            tool=self.spec.name,
            number=call.attempts,
            span_id=span_id,
            started_at=started,
            duration_ms=(time.perf_counter() - t0) * 1000,
            waited_ms=waited * 1000,
            http_status=outcome.status,
            outcome="ok",
            error=traces.redact_text(outcome.detail or outcome.message, call=call)[:2000],
            downstream_request_id=outcome.request_id,
        )
        self.rows.append(row)
        return outcome, row

    def _renew(self) -> bool:
        """Extend our lease before another attempt; False: we lost the claim."""
        assert self.fence is not None
        return claims.renew(
            key=self.call.idempotency_key, fence=self.fence, lease_s=claims.lease_s(self.spec)
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
                end(
                    call,
                    Status.DEGRADED,
                    "fatal",
                    Reason.RESULT_INVALID,
                    message,
                    feedback.result_invalid(spec.name, message),
                )
                return
        end(call, Status.SUCCEEDED, "", "", "", text or feedback.succeeded(spec.name))

    def _too_large(self, message: str) -> None:
        """A 2xx answer past TOOLOPS_DOWNSTREAM_MAX_BYTES, left unread. A read ends
        `failed`: nothing changed and nothing usable came back. A write took effect, so it
        ends `degraded` with no result — `failed` would invite the model to send it again —
        and its undo is registered as for any write that was done."""
        call, name = self.call, self.spec.name
        if self.spec.is_read:
            end(
                call,
                Status.FAILED,
                "fatal",
                Reason.DOWNSTREAM_ERROR,
                message,
                feedback.too_large(name, message, done=False),
            )
        else:
            message = f"{message}; the write took effect"
            end(
                call,
                Status.DEGRADED,
                "fatal",
                Reason.DOWNSTREAM_ERROR,
                message,
                feedback.too_large(name, message, done=True),
            )

    def _circuit_open(self, until: datetime | None) -> None:
        when = until.isoformat(timespec="seconds").replace("+00:00", "Z") if until else None
        message = f"circuit open{f' until {when}' if when else ''}"
        if self._maybe_done(message):
            return
        end(
            self.call,
            Status.FAILED,
            "retry",
            Reason.CIRCUIT_OPEN,
            message,
            feedback.circuit_open(self.spec.name, when),
        )

    def _exhausted(self, message: str, reason: str = Reason.DOWNSTREAM_ERROR) -> None:
        call, spec = self.call, self.spec
        if self._maybe_done(message, reason):
            return
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
            end(
                call,
                Status.FAILED,
                "retry",
                reason,
                message,
                feedback.exhausted(spec.name, call.attempts, message),
            )

    def _maybe_done(self, message: str, reason: str = Reason.TIMEOUT) -> bool:
        """A write with an undo, or irreversible, whose retries stop (attempts, budget,
        breaker, deadline) after an attempt that may have taken effect must not end
        `failed`: its effect would be neither known nor undone. Its query tool settles it
        (found: succeeded, and its undo registered; not found: the ending as planned, and
        False), else it ends `unknown` for a person. True when it ended the call."""
        spec = self.spec
        if not self.maybe_done or (spec.compensation is None and spec.kind != "irreversible"):
            return False
        message = f"{message}; an earlier attempt may have taken effect"
        if spec.query is not None:
            return self.reconcile(message, reason=reason) is not QueryResult.NOT_FOUND
        self.settle_unknown(message, reason=reason)
        return True

    def settle_unknown(self, message: str, reason: str = Reason.TIMEOUT) -> None:
        query = self.spec.query.tool if self.spec.query else None
        end(
            self.call,
            Status.UNKNOWN,
            "unknown",
            reason,
            message,
            feedback.unknown(self.spec.name, message, query=query),
        )
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
