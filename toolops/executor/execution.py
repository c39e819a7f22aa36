"""The attempts of one call: the part of the path that talks to the downstream
(DESIGN.md): breaker → budget → attempt → classify → backoff, and an unknown outcome
reconciled by asking the tool's query tool. Each ending is set on the call (endings.py);
the result is recorded after, by record.py.

Used by the agent's calls (pipeline.py), approved calls (approved.py), recovered claims
(replay.py) and the worker's undo calls (undo.py)."""

from __future__ import annotations

import time
from typing import Any

from django.utils import timezone

from toolops.crash import crash_point
from toolops.models import Attempt, ToolCall, new_span_id
from toolops.tools.outcome import Failure, Outcome
from toolops.tools.spec import ToolSpec
from traces import services as traces

from . import backoff, breaker, claims, feedback
from .breaker import BreakerRow
from .budget import Budget
from .classify import Classified, Verdict, classify
from .endings import Endings, end
from .reconcile import QueryResult, query_outcome
from .transport import send

Status = ToolCall.Status
Reason = ToolCall.Reason


class Execution(Endings):
    """The attempts of one call and their recording.

    A call outside the run's budget (`budget.counted` False: the worker's compensation
    calls, as an exhausted run must still be undone) has its spans start a trace of
    their own, and its waits grow on every retry (one worker, no herd to spread)."""

    def __init__(
        self,
        *,
        call: ToolCall,
        spec: ToolSpec,
        budget: Budget,
        fence: int | None,
        trace_id: str | None = None,
        breaker_row: BreakerRow | None = None,
    ) -> None:
        super().__init__(call=call, spec=spec, run=budget.run)
        self.budget = budget
        self.fence = fence
        self.trace_id = trace_id or budget.run.trace_id
        self.lost_claim = False
        self.resumed = False  # taken over from a holder that died
        # The tool's breaker as read with the run (context.py), for the first attempt.
        self.breaker_row = breaker_row

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
        admission = breaker.admit(spec, self.breaker_row)
        self.breaker_row = None  # later attempts read it afresh
        if not admission.allowed:
            self._circuit_open(admission.available_at)
            return None
        if not self.budget.reserve_attempt():
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
            jitter="full" if self.budget.counted else "growing",
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

    def _past_deadline(self, wait_s: float) -> bool:
        run = self.run
        return (
            self.budget.counted
            and run.max_seconds is not None
            and run.seconds_used() + wait_s >= run.max_seconds
        )
