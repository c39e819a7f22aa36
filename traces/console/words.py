"""The run page in plain words, for the support person who opens it from a ticket: a call's
status, why it did not succeed, its approval, and what undid it. The words a machine
needs (tool_call_ids, compensations, idempotency records, spans) stay under the page's
"Technical details" (templates/traces/run.html).

Whether a call can be undone is said by the catalog's one wording
(toolops/tools/reversibility.py), here as on the approval page."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from toolops.models import Approval, Run, ToolCall
from toolops.tools.reversibility import reversibility
from toolops.tools.spec import ToolSpec
from toolops.tools.wording import error_sentence

S = ToolCall.Status

# A call's status as people read it: the same words as the approval page's
# (toolops/approvals/wording.py CALL_STATUS_WORDS, a module this one may not import).
CALL_STATUS_WORDS: dict[str, str] = {
    S.SUCCEEDED: "done",
    S.DEGRADED: "done in part",
    S.FAILED: "failed",
    S.UNKNOWN: "outcome unknown",
    S.SKIPPED: "skipped",
    S.PENDING_APPROVAL: "waiting for approval",
    S.REJECTED: "rejected",
    S.IN_PROGRESS: "in progress",
}
RUN_STATUS_WORDS: dict[str, str] = {
    Run.Status.RUNNING: "running",
    Run.Status.COMPLETED: "completed",
    Run.Status.ABORTING: "aborted, being undone",
    Run.Status.ABORTED: "aborted",
    Run.Status.COMPENSATION_FAILED: "aborted, an undo failed",
    Run.Status.BUDGET_EXHAUSTED: "budget used up",
}
# Why a call did not succeed, where its stored error says it in a machine's words
# ("circuit open until …") or says nothing.
REASON_WORDS: dict[str, str] = {
    ToolCall.Reason.CIRCUIT_OPEN: "ToolOps paused calls to its service after repeated errors",
    ToolCall.Reason.BUDGET_EXHAUSTED: "the run's budget ran out",
    ToolCall.Reason.DEPENDENCY_FAILED: "a call it depends on did not succeed",
    ToolCall.Reason.INVALID_ARGS: "the tool refused the details the agent sent",
    ToolCall.Reason.UNKNOWN_TOOL: "there is no such tool",
    ToolCall.Reason.RESULT_INVALID: "its answer could not be read",
}


def status_words(status: str) -> str:
    return CALL_STATUS_WORDS.get(status, status.replace("_", " "))


def run_status_words(status: str) -> str:
    return RUN_STATUS_WORDS.get(status, status.replace("_", " "))


def why_words(call: ToolCall, spec: ToolSpec | None, *, whole: bool = True) -> str:
    """Why `call` ended as it did, in words ("the payments service answered 503
    (unavailable)"); "" when nothing is known. `whole`: the call was read with its
    error message (a call read with a few columns only has its reason)."""
    if call.error_reason in REASON_WORDS:
        return REASON_WORDS[call.error_reason]
    message = call.error_message if whole else ""
    return error_sentence(message, tool=call.tool, spec=spec)


def outcome_words(call: ToolCall, spec: ToolSpec | None, *, whole: bool = True) -> str:
    """What became of a call that did not succeed, after its title: "failed — the
    payments service answered 503 (unavailable)", "was skipped — a call it depends on
    did not succeed", "is waiting for approval"."""
    why = why_words(call, spec, whole=whole)
    if call.status == S.REJECTED:
        if call.error_reason == ToolCall.Reason.EXPIRED:
            return "was not approved in time: nothing was sent"
        # A reviewer, or the run's end (an abort rejects what still waits for a person).
        return "was rejected: nothing was sent"
    if call.status == S.PENDING_APPROVAL:
        return "is waiting for approval"
    if call.status == S.IN_PROGRESS:
        return "is in progress"
    if call.status == S.UNKNOWN:
        return "has an unknown outcome: it may or may not have happened"
    said: dict[str, str] = {S.SKIPPED: "was skipped", S.DEGRADED: "was done only in part"}
    head = said.get(call.status, "failed")
    return f"{head} — {why}" if why else head


@dataclass(frozen=True)
class ApprovalLine:
    """A call's approval as one line: "Approved by rita at 14:05 — undone only by
    refund." The time is left to the template (a <time> in the viewer's zone)."""

    status: str  # the approval's: pending · approved · rejected · expired
    who: str  # who decided it ("" while pending, or when it expired)
    at: datetime | None  # when it was decided; when it was held while pending; expiry
    label: str  # reversibility(tool, spec).label: "undone only by refund"
    duplicate: bool  # held as a possible duplicate of an earlier call
    note: str  # the reviewer's note

    @property
    def sent(self) -> bool:
        """Whether the call was let through (a rejected or expired one never ran)."""
        return self.status in ("pending", "approved")


def approval_line(approval: Approval, *, tool: str, spec: ToolSpec | None) -> ApprovalLine:
    """`approval` (with its decided_by read) as the run page says it."""
    status = approval.status
    at = {"pending": approval.created_at, "expired": approval.expires_at}.get(
        status, approval.decided_at
    )
    decided = approval.decided_by
    who = decided.get_username() if decided is not None else ""
    if status in ("approved", "rejected") and not who:
        who = "a deleted user"  # SET_NULL: the decision stays, its reviewer is gone
    return ApprovalLine(
        status=status,
        who=who,
        at=at,
        label=reversibility(tool, spec).label,
        duplicate=approval.reason == Approval.Reason.POSSIBLE_DUPLICATE,
        note=approval.note.strip()[:300],
    )
