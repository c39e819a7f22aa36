"""Approvals (DESIGN.md "Approvals"): the gate's one question, holding a call for a
person, deciding once and atomically, executing an approved call through the worker,
and ending what nobody decided in time or what an abort left waiting.

Every transition is guarded by the approval's row lock and a conditional UPDATE on its
status, so racing reviewers, the expiry task and an abort agree on one ending."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from toolops import live
from toolops.approvals.models import Approval, ApprovalVote
from toolops.audit.services import Action, audit_record
from toolops.models import Run, ToolCall
from traces import services as traces

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser

    from toolops.tools.spec import ToolSpec

AS = Approval.Status
CS = ToolCall.Status
# Statuses of an earlier call that make a repeat suspicious: it took, or may have taken,
# effect (a failed, rejected or skipped call did not).
DUPLICATE_STATUSES = (CS.SUCCEEDED, CS.DEGRADED, CS.UNKNOWN, CS.PENDING_APPROVAL,
                      CS.IN_PROGRESS)  # fmt: skip
LIVE_GROUP = "approvals"


class DecisionRefused(Exception):
    """A decision the approval's state does not allow; says why, and by whom if decided."""


@dataclass(frozen=True)
class Need:
    """Why a call must wait for a person, and on what terms."""

    reason: str
    duplicate_of: int | None
    ttl_s: int
    approvals_required: int


# -- the gate ---------------------------------------------------------------------------


def duplicate_sql(run_alias: str) -> str:
    """A subquery for the run read (selectors.run_get_for_agent): the earliest call with
    this tool and canonical args in ANOTHER run of the same agent and session_key, within
    the window, that took or may have taken effect. Parameters: tool, args digest,
    window in seconds."""
    from toolops.executor.claims import now_minus_sql

    since, _ = now_minus_sql()
    statuses = ", ".join(f"'{s}'" for s in DUPLICATE_STATUSES)
    # CASE first: a run without a session_key (most) never runs the subquery at all.
    return (
        f"CASE WHEN {run_alias}.session_key IS NULL THEN NULL ELSE "
        "(SELECT d.id FROM toolops_toolcall d JOIN toolops_run dr ON dr.id = d.run_id "
        f"WHERE dr.session_key = {run_alias}.session_key "
        f"AND dr.agent_id = {run_alias}.agent_id AND dr.id <> {run_alias}.id "
        "AND d.role = 'call' AND d.tool = %s AND d.args_digest = %s "
        f"AND d.created_at >= {since} AND d.status IN ({statuses}) "
        "ORDER BY d.created_at, d.id LIMIT 1) END"
    )


def duplicate_params(tool: str, args_digest: str, window_s: int) -> list[object]:
    from toolops.executor.claims import now_minus_sql

    _, param = now_minus_sql()
    return [tool, args_digest, param(window_s)]  # type: ignore[operator]


def approval_needed(*, run: Run, spec: ToolSpec, args_digest: str) -> Need | None:
    """Does this call need a person? The executor's one question. A read never does; a
    tool with no approval and no session to compare costs nothing here: the possible
    duplicate was read along with the run (`run.session_duplicate_pk`), or is read now
    only when the run has a session_key."""
    if spec.is_read:
        return None
    window = spec.session_dedupe_window_s
    duplicate = None
    if run.session_key and window > 0:
        if hasattr(run, "session_duplicate_pk"):
            duplicate = run.session_duplicate_pk
        else:
            duplicate = _find_duplicate(run, spec.name, args_digest, window)
    if duplicate is not None:
        reason = Approval.Reason.POSSIBLE_DUPLICATE
    elif spec.requires_approval:
        irreversible = spec.kind == "irreversible"
        reason = Approval.Reason.IRREVERSIBLE if irreversible else Approval.Reason.POLICY
    else:
        return None
    return Need(reason, duplicate, spec.approval_ttl_s, spec.approvals_required)


def _find_duplicate(run: Run, tool: str, args_digest: str, window_s: int) -> int | None:
    sql = f"SELECT {duplicate_sql('r')} FROM toolops_run r WHERE r.id = %s"
    with connection.cursor() as cursor:
        cursor.execute(sql, [*duplicate_params(tool, args_digest, window_s), run.pk])
        row = cursor.fetchone()
    return None if row is None else row[0]


def approval_open(*, run: Run, call: ToolCall, need: Need) -> Approval:
    """The approval a held call waits on (inside the caller's transaction, with the call's
    claim: a held call without its approval must never exist)."""
    approval = Approval.objects.create(
        run=run, tool=call.tool, reason=need.reason, duplicate_of_id=need.duplicate_of,
        args_hash=call.args_digest, approvals_required=need.approvals_required,
        expires_at=timezone.now() + timedelta(seconds=need.ttl_s),
    )  # fmt: skip
    live.changed(group=LIVE_GROUP, item=approval.pk)
    return approval


# -- decisions -------------------------------------------------------------------------------


def approval_decide(
    *, approval: Approval, by: AbstractBaseUser, approve: bool, note: str, args_hash: str
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
        refusal = _refusal(locked, by=by, approve=approve, note=note, args_hash=args_hash)
        if refusal is None:
            _decide(locked, by=by, approve=approve, note=note)
    if refusal is not None:
        # Raised outside the transaction: an expiry found on the way is kept.
        raise DecisionRefused(refusal)
    return locked


def _refusal(
    approval: Approval, *, by: AbstractBaseUser, approve: bool, note: str, args_hash: str
) -> str | None:
    if approval.status != AS.PENDING:
        who = approval.decided_by.get_username() if approval.decided_by else "the system"
        when = f" at {approval.decided_at:%H:%M:%S} UTC" if approval.decided_at else ""
        return f"Already decided: {approval.status} by {who}{when}."
    if approval.expires_at <= timezone.now():
        _end(approval, AS.EXPIRED, by=None, note="")
        return "This approval has expired: the call was not run."
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


def _owns_agent(approval: Approval, user: AbstractBaseUser) -> bool:
    return Run.objects.filter(pk=approval.run_id, agent__owner_id=user.pk).exists()


def _decide(approval: Approval, *, by: AbstractBaseUser, approve: bool, note: str) -> None:
    decision = ApprovalVote.Decision.APPROVE if approve else ApprovalVote.Decision.REJECT
    # unique(approval, reviewer) backs the check above against a double submit.
    ApprovalVote.objects.create(
        approval=approval, reviewer=by, decision=decision, note=note,
        args_hash=approval.args_hash,
    )  # fmt: skip
    said = f": {note}" if note else ""
    audit_record(
        actor=by, action=Action.APPROVAL_DECIDE, obj=approval,
        detail={"decision": decision, "args_hash": approval.args_hash, "note": note},
        summary=f"{decision} (args {approval.args_hash[:12]}…){said}",
    )  # fmt: skip
    if not approve:
        _end(approval, AS.REJECTED, by=by, note=note)
    elif (
        approval.votes.filter(decision=ApprovalVote.Decision.APPROVE).count()
        >= approval.approvals_required
    ):
        _approve(approval, by=by, note=note)
    live.changed(group=LIVE_GROUP, item=approval.pk)


def _approve(approval: Approval, *, by: AbstractBaseUser, note: str) -> None:
    now = timezone.now()
    Approval.objects.filter(pk=approval.pk, status=AS.PENDING).update(
        status=AS.APPROVED, decided_by=by, decided_at=now, note=note
    )
    approval.status, approval.decided_by, approval.decided_at = AS.APPROVED, by, now
    ToolCall.objects.filter(approval=approval, status=CS.PENDING_APPROVAL).update(
        status=CS.IN_PROGRESS, feedback=""
    )
    traces.run_changed(run_pk=approval.run_id)
    _execute_later(approval.pk)


def _execute_later(approval_pk: int) -> None:
    from toolops.tasks import execute_approved_call as execute_approved_call_task

    transaction.on_commit(lambda: execute_approved_call_task.delay(approval_pk))


def _end(
    approval: Approval,
    status: str,
    *,
    by: AbstractBaseUser | None,
    note: str,
    was: str = AS.PENDING,
) -> bool:
    """Reject or expire an approval (`was` pending, or approved but never started) and
    its call, which ends without running; its claim is recorded, so the same request
    again answers this ending."""
    from toolops.executor import claims, feedback

    now = timezone.now()
    # An approval that was approved keeps its approver: the run ended it, not a reviewer.
    decided = {} if was == AS.APPROVED else {"decided_by": by, "decided_at": now}
    if not Approval.objects.filter(pk=approval.pk, status=was).update(
        status=status, note=note, **decided
    ):
        return False
    approval.status, approval.note = status, note
    if decided:
        approval.decided_by, approval.decided_at = by, now  # type: ignore[assignment]
    call = ToolCall.objects.filter(approval=approval).first()
    if call is None:
        return True
    expired = status == AS.EXPIRED
    reason = ToolCall.Reason.EXPIRED if expired else ToolCall.Reason.REJECTED
    message = "approval expired" if expired else f"rejected: {note}" if note else "rejected"
    if expired:
        text = feedback.expired(call.tool)
    elif by is None:
        text = feedback.run_ended(call.tool, note)
    else:
        text = feedback.rejected(call.tool, note)
    fields = {
        "status": CS.REJECTED, "error_class": "fatal", "error_reason": reason,
        "error_message": message[:2000], "feedback": text, "finished_at": now,
    }  # fmt: skip
    if ToolCall.objects.filter(pk=call.pk, status__in=ToolCall.WAITING).update(**fields):
        for name, value in fields.items():
            setattr(call, name, value)
        traces.call_export(call=call)
    if call.idempotency_key:
        claims.close(key=call.idempotency_key)
    live.changed(group=LIVE_GROUP, item=approval.pk)
    traces.run_changed(run_pk=call.run_id)
    return True


def approvals_end_for_run(*, run: Run, note: str) -> int:
    """A run that ended (aborted, completed) takes no more calls: what still waits for a
    person, or was approved but not yet started, ends `rejected` with `note`."""
    ended = 0
    waiting = Approval.objects.filter(run=run).filter(
        Q(status=AS.PENDING) | Q(status=AS.APPROVED, execution_started_at__isnull=True)
    )
    for approval in waiting.select_for_update():
        if approval.status == AS.APPROVED and not Approval.objects.filter(
            pk=approval.pk, execution_started_at__isnull=True
        ).update(execution_started_at=timezone.now()):
            continue  # its worker started it a moment ago: it runs to its end
        ended += _end(approval, AS.REJECTED, by=None, note=note, was=approval.status)
    return ended


def approvals_expire(*, limit: int = 200) -> int:
    """End the pending approvals whose time ran out (the worker, every 15 s) — and, as a
    backstop, any still waiting in a run that has ended."""
    due = Approval.objects.pending().filter(expires_at__lte=timezone.now()).order_by("expires_at")
    ended = 0
    for approval in due[:limit]:
        with transaction.atomic():
            ended += _end(approval, AS.EXPIRED, by=None, note="")
    over = Run.objects.filter(
        approvals__status=AS.PENDING, status__in=[Run.Status.COMPLETED, *Run.ABORT_STATES]
    ).distinct()
    for run in over[:limit]:
        with transaction.atomic():
            note = "run completed" if run.status == Run.Status.COMPLETED else "run aborted"
            ended += approvals_end_for_run(run=run, note=note)
    return ended


def approvals_stalled() -> list[int]:
    """Approved calls nobody started within TOOLOPS_APPROVAL_GRACE_S: their worker
    message was lost."""
    from django.conf import settings

    since = timezone.now() - timedelta(seconds=settings.TOOLOPS_APPROVAL_GRACE_S)
    return list(
        Approval.objects.filter(
            status=AS.APPROVED, execution_started_at__isnull=True, decided_at__lt=since
        ).values_list("pk", flat=True)[:100]
    )


# -- the worker ------------------------------------------------------------------------------


def approved_call_execute(*, approval_pk: int) -> str:
    """Execute an approved call through the normal executor path (claim, breaker, retries,
    unknown-outcome reconciliation, compensation registration). Safe to deliver twice:
    the first to set execution_started_at owns it."""
    from toolops.executor.approved import execute_held_call, take_up

    with transaction.atomic():
        # Started and taken up together: a worker that dies after this leaves a claim
        # with an ordinary lease, which the stale-claim sweep recovers within a minute.
        if not Approval.objects.filter(
            pk=approval_pk, status=AS.APPROVED, execution_started_at__isnull=True
        ).update(execution_started_at=timezone.now()):
            return "skipped"
        call = ToolCall.objects.select_related("run", "approval").get(approval_id=approval_pk)
        run = Run.objects.select_for_update().get(pk=call.run_id)
        if run.status not in (Run.Status.RUNNING, Run.Status.BUDGET_EXHAUSTED):
            # The run ended between the approval and now: the call never runs.
            note = "run completed" if run.status == Run.Status.COMPLETED else "run aborted"
            _end(call.approval, AS.REJECTED, by=None, note=note, was=AS.APPROVED)
            return "skipped"
        fence = take_up(call=call)
    status = execute_held_call(call=call, fence=fence) if fence is not None else "skipped"
    live.changed(group=LIVE_GROUP, item=approval_pk)
    return status


def approval_out(approval: Approval | None) -> dict[str, Any] | None:
    """The `approval` object of a call (API.md)."""
    if approval is None:
        return None
    from toolops.api.output import iso

    duplicate = approval.duplicate_of.call_id if approval.duplicate_of_id else None
    return {
        "approval_id": approval.approval_id,
        "status": approval.status,
        "reason": approval.reason,
        "duplicate_of": duplicate,
        "url": f"/console/approvals/{approval.approval_id}/",
        "expires_at": iso(approval.expires_at),
        "decided_by": approval.decided_by.get_username() if approval.decided_by_id else None,
        "note": approval.note or None,
    }
