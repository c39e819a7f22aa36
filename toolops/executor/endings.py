"""How a call's attempts end (execution.py): each ending sets the call's status, its
error class and reason, and the line for the model (feedback.py); a write whose retries
stop after an attempt that may have taken effect is settled by its query tool or left
`unknown` for a person, never `failed`. The result is recorded after, by record.py."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone

from toolops.models import Attempt, Run, ToolCall
from toolops.tools.spec import ToolSpec
from traces import services as traces

from . import feedback
from .reconcile import QueryResult, query_outcome
from .schemas import schema_errors, where

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


class Endings:
    """A call's attempts so far (`rows`) and the ways they end. Execution adds the
    attempts themselves."""

    def __init__(self, *, call: ToolCall, spec: ToolSpec, run: Run) -> None:
        self.call = call
        self.spec = spec
        self.run = run
        self.rows: list[Attempt] = []
        # An attempt of a write went out and no answer says what became of it (a timeout,
        # a reset, a 502 after the commit): retried under its key, but if the retries end
        # without an answer the write may have been done (_maybe_done).
        self.maybe_done = False

    def _succeeded(self, body: Any, text: str | None = None) -> None:
        call, spec = self.call, self.spec
        # Stored redacted (the full result sealed in `result_sealed`); the agent gets it whole.
        traces.result_seal(call, body, spec=spec)
        if spec.result_schema is not None:
            errors = schema_errors(spec.result_schema, body, formats=False)
            if errors:
                path = where(errors[0])
                message = f"result {path + ': ' if path else ''}{errors[0].message}"
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
