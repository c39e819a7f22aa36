"""The one failure classifier every tool shares (DESIGN.md "Failure classes").

A transport (toolops/tools/: HTTP or Python) reports what happened as an `Outcome`;
`classify` decides whether that is a result, a fatal failure, a harmless retry, or an
unknown outcome."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from toolops.tools.outcome import Failure, Outcome


class Verdict(enum.StrEnum):
    OK = "ok"
    FATAL = "fatal"
    RETRY = "retry"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Classified:
    verdict: Verdict
    reason: str  # an API.md error.reason

    @property
    def is_ok(self) -> bool:
        return self.verdict is Verdict.OK


# Answers that say the request did not take effect: replay is harmless on any tool.
NOT_APPLIED_STATUSES = frozenset({429, 503})
# Answers after which the downstream may or may not have acted.
AMBIGUOUS_STATUSES = frozenset({500, 502, 504})


def classify(outcome: Outcome, *, replay_safe: bool) -> Classified:
    """`replay_safe`: a read, an idempotent write, or a downstream that honours our
    Idempotency-Key — sending the same request again cannot do harm twice."""
    if outcome.failure is None:
        return Classified(Verdict.OK, "")
    if outcome.failure is Failure.INVALID_BODY:
        return Classified(Verdict.FATAL, "result_invalid")
    if outcome.failure is Failure.TOO_LARGE:
        # The downstream answered (so the outcome is known, not unknown) and would answer
        # the same again: never retried. A write did take effect; the executor says so.
        return Classified(Verdict.FATAL, "downstream_error")
    if outcome.failure is Failure.REFUSED:
        return Classified(Verdict.RETRY, "downstream_error")
    if outcome.failure is Failure.ERROR:
        if outcome.retryable is None or not outcome.retryable:
            # An exception in in-process code is a bug until it says otherwise.
            return Classified(Verdict.FATAL, "downstream_error")
        return Classified(Verdict.RETRY if replay_safe else Verdict.UNKNOWN, "downstream_error")
    if outcome.failure is Failure.HTTP:
        status = outcome.status or 0
        if status in NOT_APPLIED_STATUSES:
            return Classified(Verdict.RETRY, "downstream_error")
        if status in AMBIGUOUS_STATUSES or status >= 500:
            return Classified(Verdict.RETRY if replay_safe else Verdict.UNKNOWN, "downstream_error")
        return Classified(Verdict.FATAL, "downstream_error")
    reason = "timeout" if outcome.failure is Failure.TIMEOUT else "downstream_error"
    return Classified(Verdict.RETRY if replay_safe else Verdict.UNKNOWN, reason)
