"""Approvals (DESIGN.md "Approvals"), after the executor's gate held a call for a person
(toolops/executor/gate.py): deciding once and atomically, starting an approved call
through the worker, and ending what nobody decided in time or what an abort left
waiting.

Every transition is guarded by the approval's row lock and a conditional UPDATE on its
status, so racing reviewers, the expiry task and an abort agree on one ending."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.db.models.functions import Now
from django.utils import timezone

from toolops import dbclock, executor, live
from toolops.approvals.models import LIVE_GROUP, Approval, ApprovalVote
from toolops.audit.services import Action, audit_record
from toolops.crash import crash_point
from toolops.models import Run, ToolCall
from toolops.queue import EXECUTE_APPROVED_CALL, enqueue_on_commit
from traces import services as traces

if TYPE_CHECKING:
    from django.contrib.auth.models import User

ApprovalStatus = Approval.Status
CallStatus = ToolCall.Status


class DecisionRefused(Exception):
    """A decision the approval's state does not allow; says why, and by whom if decided."""


# -- decisions -------------------------------------------------------------------------------


def approval_decide(
    *, approval: Approval, by: User, approve: bool, note: str, args_hash: str
) -> Approval:
    """One reviewer's decision. Raises DecisionRefused when it was decided already (saying
    by whom), has expired, was shown with other args, this reviewer already decided, or
    would approve a call of an agent they own."""
    note = note.strip()
    if not approve and not note:
        raise DecisionRefused("A note is required to reject: tell the agent why.")
    # The reviewer saw the full args; a note quoting them is kept (and told to the agent,
    # and audited) redacted.
    note = traces.redact_text(note, call=ToolCall.objects.filter(approval=approval).first())
    with transaction.atomic():
        # The row lock serialises racing reviewers; the conditional UPDATEs below would
        # refuse a second decision even without it.
        locked = Approval.objects.select_for_update().get(pk=approval.pk)
        refusal = _refusal(locked, by=by, approve=approve, args_hash=args_hash)
        if refusal is None:
            _decide(locked, by=by, approve=approve, note=note)
    if refusal is not None:
        # Raised outside the transaction: an expiry found on the way is kept.
        raise DecisionRefused(refusal)
    return locked


EXPIRED = "This approval has expired: the call was not run."


def _refusal(approval: Approval, *, by: User, approve: bool, args_hash: str) -> str | None:
    """Under the row lock: why the decision is refused, ending an expired approval found
    on the way."""
    refusal = approval_refusal(approval=approval, by=by, approve=approve, args_hash=args_hash)
    if refusal == EXPIRED:
        _end(approval, ApprovalStatus.EXPIRED, by=None, note="")
    return refusal


def approval_refusal(*, approval: Approval, by: User, approve: bool, args_hash: str) -> str | None:
    """Why `by`'s decision on `approval` would be refused, None when it would be taken.
    Reads only: a page asks it before it asks a question (approvals/deciding.py), and the
    decision asks it again under its row lock."""
    if approval.status != ApprovalStatus.PENDING:
        who = approval.decided_by.get_username() if approval.decided_by else "the system"
        when = f" at {approval.decided_at:%H:%M:%S} UTC" if approval.decided_at else ""
        return f"Already decided: {approval.status} by {who}{when}."
    if approval.expires_at <= dbclock.now():
        return EXPIRED
    if args_hash != approval.args_hash:
        return (
            "The call's args are not the ones you were shown; reload the page and decide "
            "on what it asks now."
        )
    if approve and _owns_agent(approval, by):
        # Separation of duties: whoever runs an agent may stop its calls, never wave them
        # through; another reviewer decides.
        return (
            "You cannot approve calls made by your own agent: another reviewer must decide "
            "(you may still reject it)."
        )
    earlier = approval.votes.filter(reviewer=by).first()
    if earlier is not None:
        # One vote per reviewer: a second reviewer decides from here (two-reviewer tools).
        return (
            f"You have already decided on this call ({earlier.decision}); "
            "it needs another reviewer."
        )
    return None


def _owns_agent(approval: Approval, user: User) -> bool:
    return Run.objects.filter(pk=approval.run_id, agent__owner_id=user.pk).exists()


def _decide(approval: Approval, *, by: User, approve: bool, note: str) -> None:
    decision = ApprovalVote.Decision.APPROVE if approve else ApprovalVote.Decision.REJECT
    # unique(approval, reviewer) backs the check above against a double submit.
    ApprovalVote.objects.create(
        approval=approval,
        reviewer=by,
        decision=decision,
        note=note,
        args_hash=approval.args_hash,
    )
    said = f": {note}" if note else ""
    audit_record(
        actor=by,
        action=Action.APPROVAL_DECIDE,
        obj=approval,
        detail={"decision": decision, "args_hash": approval.args_hash, "note": note},
        summary=f"{decision} (args {approval.args_hash[:12]}…){said}",
    )
    if not approve:
        _end(approval, ApprovalStatus.REJECTED, by=by, note=note)
    elif (
        approval.votes.filter(decision=ApprovalVote.Decision.APPROVE).count()
        >= approval.approvals_required
    ):
        _approve(approval, by=by, note=note)
    live.changed(group=LIVE_GROUP, item=approval.pk)


def _approve(approval: Approval, *, by: User, note: str) -> None:
    now = dbclock.now()  # the stalled-approval sweep judges it by the same clock
    Approval.objects.filter(pk=approval.pk, status=ApprovalStatus.PENDING).update(
        status=ApprovalStatus.APPROVED, decided_by=by, decided_at=now, note=note
    )
    approval.status, approval.decided_by, approval.decided_at = ApprovalStatus.APPROVED, by, now
    ToolCall.objects.filter(approval=approval, status=CallStatus.PENDING_APPROVAL).update(
        status=CallStatus.IN_PROGRESS, feedback=""
    )
    traces.run_changed(run_pk=approval.run_id)
    _execute_later(approval.pk)


def _execute_later(approval_pk: int) -> None:
    enqueue_on_commit(EXECUTE_APPROVED_CALL, approval_pk)


def _end(
    approval: Approval,
    status: str,
    *,
    by: User | None,
    note: str,
    was: str = ApprovalStatus.PENDING,
) -> bool:
    """Reject or expire an approval (`was` pending, or approved but never started) and
    its call, which ends without running; its claim is recorded, so the same request
    again answers this ending."""
    now = timezone.now()
    # An approval that was approved keeps its approver: the run ended it, not a reviewer.
    decided = {} if was == ApprovalStatus.APPROVED else {"decided_by": by, "decided_at": now}
    if not Approval.objects.filter(pk=approval.pk, status=was).update(
        status=status, note=note, **decided
    ):
        return False
    approval.status, approval.note = status, note
    if decided:
        approval.decided_by, approval.decided_at = by, now
    call = ToolCall.objects.filter(approval=approval).first()
    if call is not None:
        executor.held_call_release(
            call=call,
            expired=status == ApprovalStatus.EXPIRED,
            by_person=by is not None,
            note=note,
        )
    live.changed(group=LIVE_GROUP, item=approval.pk)
    return True


def approvals_end_for_run(*, run: Run, note: str) -> int:
    """A run that ended (aborted, completed) takes no more calls: what still waits for a
    person, or was approved but not yet started, ends `rejected` with `note`."""
    ended = 0
    waiting = Approval.objects.filter(run=run).filter(
        Q(status=ApprovalStatus.PENDING)
        | Q(status=ApprovalStatus.APPROVED, execution_started_at__isnull=True)
    )
    for approval in waiting.select_for_update():
        if approval.status == ApprovalStatus.APPROVED and not Approval.objects.filter(
            pk=approval.pk, execution_started_at__isnull=True
        ).update(execution_started_at=timezone.now()):
            continue  # its worker started it a moment ago: it runs to its end
        ended += _end(approval, ApprovalStatus.REJECTED, by=None, note=note, was=approval.status)
    return ended


def approvals_expire(*, limit: int = 200) -> int:
    """End the pending approvals whose time ran out (the worker, every 15 s) — and, as a
    backstop, any still waiting in a run that has ended."""
    due = Approval.objects.pending().filter(expires_at__lte=Now()).order_by("expires_at")
    ended = 0
    for approval in due[:limit]:
        with transaction.atomic():
            ended += _end(approval, ApprovalStatus.EXPIRED, by=None, note="")
    over = Run.objects.filter(
        approvals__status=ApprovalStatus.PENDING,
        status__in=[Run.Status.COMPLETED, *Run.ABORT_STATES],
    ).distinct()
    for run in over[:limit]:
        with transaction.atomic():
            note = "run completed" if run.status == Run.Status.COMPLETED else "run aborted"
            ended += approvals_end_for_run(run=run, note=note)
    return ended


def approvals_stalled() -> list[int]:
    """Approved calls nobody started within TOOLOPS_APPROVAL_GRACE_S: their worker
    message was lost."""
    since = Now() - timedelta(seconds=settings.TOOLOPS_APPROVAL_GRACE_S)
    return list(
        Approval.objects.filter(
            status=ApprovalStatus.APPROVED, execution_started_at__isnull=True, decided_at__lt=since
        ).values_list("pk", flat=True)[:100]
    )


# -- the worker ------------------------------------------------------------------------------


def approved_call_execute(*, approval_pk: int) -> str:
    """Execute an approved call through the normal executor path (claim, breaker, retries,
    unknown-outcome reconciliation, compensation registration). Safe to deliver twice:
    the first to set execution_started_at owns it."""
    with transaction.atomic():
        # Started and taken up together: a worker that dies after this leaves a claim
        # with an ordinary lease, which the stale-claim sweep recovers within a minute.
        if not Approval.objects.filter(
            pk=approval_pk, status=ApprovalStatus.APPROVED, execution_started_at__isnull=True
        ).update(execution_started_at=timezone.now()):
            return "skipped"
        call = ToolCall.objects.select_related("run", "approval").get(approval_id=approval_pk)
        run = Run.objects.select_for_update().get(pk=call.run_id)
        if run.status not in (Run.Status.RUNNING, Run.Status.BUDGET_EXHAUSTED):
            # The run ended between the approval and now: the call never runs.
            note = "run completed" if run.status == Run.Status.COMPLETED else "run aborted"
            was = ApprovalStatus.APPROVED
            assert call.approval is not None  # read by it: approval_id=approval_pk
            _end(call.approval, ApprovalStatus.REJECTED, by=None, note=note, was=was)
            return "skipped"
        fence = executor.approved_call_take_up(call=call)
    status = "skipped"
    if fence is not None:
        # Fault tests: started and taken up (committed), nothing sent.
        crash_point("after-decision")
        status = executor.approved_call_execute(call=call, fence=fence)
    live.changed(group=LIVE_GROUP, item=approval_pk)
    return status
