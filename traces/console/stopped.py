"""The run page's header: where did the run stop (DESIGN.md "Tracing": the console answers
that first), in words an operator can act on, and how much of its budget it used."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from toolops.models import Run, ToolCall

S = ToolCall.Status

# Calls that may still change: their bars run on to "now".
OPEN = (S.IN_PROGRESS, S.PENDING_APPROVAL, S.UNKNOWN)


def stopping_call(calls: Sequence[ToolCall], last_succeeded: str | None) -> ToolCall | None:
    """The first of the agent's calls after the last succeeded one that did not succeed:
    where an operator looks next (its attempts, its idempotency record, its downstream
    request id). `calls` in the run's order."""
    start = 0
    for index, call in enumerate(calls):
        if call.tool_call_id == last_succeeded:
            start = index + 1
    return next((c for c in calls[start:] if c.status != S.SUCCEEDED), None)


def call_state(call: ToolCall) -> tuple[str, str]:
    """Whether the call can still change, in a word for styles and in words for people."""
    if call.status == S.IN_PROGRESS:
        return "in_flight", "in flight"
    if call.status == S.PENDING_APPROVAL:
        return "pending_approval", "waiting for approval"
    if call.status == S.UNKNOWN:
        if call.next_reconcile_at is not None:
            when = f"{call.next_reconcile_at:%H:%M:%S} UTC"
            return "waiting_retry", f"waiting for retry: reconciled again at {when}"
        return "needs_person", "outcome unknown: needs a person"
    return "done", ""


def why_stopped(run: Run, call: ToolCall | None) -> str:
    """One sentence: the next step and why the run is not past it, or how the run ended."""
    if call is None:
        return _run_state(run)
    head = f"Step {call.step_index} {call.tool}"
    reason = call.error_reason.replace("_", " ")
    message = call.error_message.strip()[:300]
    if call.status == S.IN_PROGRESS:
        return f"{head} is in flight."
    if call.status == S.PENDING_APPROVAL:
        return f"{head} is waiting for approval."
    if call.status == S.UNKNOWN:
        if call.next_reconcile_at is not None:
            when = f"{call.next_reconcile_at:%H:%M:%S} UTC"
            return f"{head}: unknown outcome, being reconciled (next look at {when})."
        return f"{head}: unknown outcome; the worker has stopped looking, a person must settle it."
    if call.error_reason == ToolCall.Reason.CIRCUIT_OPEN:
        # The executor writes "circuit open until <ISO time>": say when to try again.
        _, _, until = message.partition(" until ")
        return f"{head} failed: circuit open" + (f" — retry after {until}." if until else ".")
    if call.error_reason == ToolCall.Reason.EXPIRED:
        return f"{head} was not approved in time: its approval expired."
    what_by_status: dict[str, str] = {
        S.FAILED: "failed",
        S.DEGRADED: "returned partial data",
        S.SKIPPED: "was skipped",
        S.REJECTED: "was rejected",
    }
    what = what_by_status.get(call.status, call.status)
    said = f"{head} {what}" + (f": {reason}" if reason else "")
    return said + (f" — {message.rstrip('.')}." if message else ".")


def _run_state(run: Run) -> str:
    if run.status == Run.Status.RUNNING:
        return "Nothing is held up: the run waits for the agent's next call."
    if run.status == Run.Status.COMPLETED:
        return "The run completed."
    if run.status == Run.Status.BUDGET_EXHAUSTED:
        return "The run's budget is used up: it takes no more calls."
    why = f": {run.end_reason}" if run.end_reason else ""
    if run.status == Run.Status.ABORTING:
        return f"The run is being aborted{why}. The worker is undoing its calls, newest first."
    if run.status == Run.Status.COMPENSATION_FAILED:
        return f"The run was aborted{why}; some of its calls could not be undone (see tickets)."
    return f"The run was aborted{why}."


@dataclass
class BudgetLine:
    label: str
    used: float | int
    limit: float | int | None
    exhausted: bool = field(init=False)

    def __post_init__(self) -> None:
        self.exhausted = self.limit is not None and self.used >= self.limit


def budget_lines(run: Run, calls: Sequence[ToolCall]) -> list[BudgetLine]:
    """Usage against the run's limits. Only a limited run keeps counters on its row; an
    unlimited one's usage is summed from its calls (as the API does)."""
    limited = run.has_limits
    return [
        BudgetLine(
            "attempts",
            run.attempts_used if limited else sum(c.attempts for c in calls),
            run.max_attempts,
        ),
        BudgetLine("seconds", round(run.seconds_used(), 1), run.max_seconds),
        BudgetLine(
            "tokens", run.tokens_used if limited else sum(c.tokens for c in calls), run.max_tokens
        ),
    ]
