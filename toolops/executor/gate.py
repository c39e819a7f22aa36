"""The approval gate (DESIGN.md "Approvals"): one question — does this call need a
person? — and, when it does, the hold: the call's key claimed and its approval opened in
one transaction, nothing sent. A read never needs one; a tool with no approval and no
session to compare costs nothing here: a possible duplicate (context.py) was read
along with the run (context.py).

What happens next — decisions, expiry, running the approved call — is toolops/approvals'."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from django.db import IntegrityError, transaction
from django.utils import timezone

from toolops import dbclock, live
from toolops.approvals.models import LIVE_GROUP, Approval
from toolops.models import Run, ToolCall
from toolops.notify import events as notify
from toolops.policy import limits as spend
from toolops.policy.limits import Hold
from toolops.policy.verdict import Verdict
from toolops.tools.spec import ToolSpec
from traces import services as traces

from . import claims, feedback, replay
from .budget import charge_run
from .errors import RunNotRunning
from .prepare import CallAnswer, CallRequest
from .statements.claim import claim
from .statements.parts import is_tool_call_id_clash

# A held call's claim outlives its approval by this much: the expiry task ends it first.
HOLD_LEASE_MARGIN_S = 300


@dataclass(frozen=True)
class Need:
    """Why a call must wait for a person, and on what terms."""

    reason: str
    duplicate_of: int | None
    ttl_s: int
    approvals_required: int
    # Held by the agent policy: the rule or limit that asked, and its version.
    rule: str = ""
    policy_version: int | None = None
    # Past a limit: the limit's sentence, for the model (policy/wording.py).
    over_limit: str = ""


def approval_needed(
    *, run: Run, spec: ToolSpec, duplicate_of: int | None, verdict: Verdict | None = None
) -> Need | None:
    """Does this call need a person? `duplicate_of`: the earlier call of the session it
    may repeat, as read with the run; `verdict`: the agent policy's word on it. A
    possible duplicate waits as one, with as many reviewers as the catalog or a rule
    asks (whichever asks more): being a duplicate never lowers the bar."""
    if spec.is_read:
        return None
    held = verdict is not None and verdict.held_by is not None
    required = spec.approvals_required if spec.requires_approval or not held else 1
    rule, version = "", None
    if verdict is not None and verdict.held_by is not None:
        required = max(required, verdict.approvals_required)
        rule, version = verdict.held_by, verdict.version
    if duplicate_of is not None and run.session_key and spec.session_dedupe_window_s > 0:
        return Need(
            Approval.Reason.POSSIBLE_DUPLICATE,
            duplicate_of,
            spec.approval_ttl_s,
            required,
            rule=rule,
            policy_version=version,
        )
    if held:
        return Need(
            Approval.Reason.POLICY,
            None,
            spec.approval_ttl_s,
            required,
            rule=rule,
            policy_version=version,
        )
    if not spec.requires_approval or (verdict is not None and verdict.lifted):
        return None
    irreversible = spec.kind == "irreversible"
    reason = Approval.Reason.IRREVERSIBLE if irreversible else Approval.Reason.POLICY
    return Need(reason, None, spec.approval_ttl_s, spec.approvals_required)


def over_limit_need(spec: ToolSpec, limit: str, version: int, sentence: str) -> Need:
    """A call past a limit whose `on_exceed` is "approve": it waits for one reviewer."""
    return Need(
        Approval.Reason.POLICY,
        None,
        spec.approval_ttl_s,
        max(1, spec.approvals_required),
        rule=limit,
        policy_version=version,
        over_limit=sentence,
    )


def hold(
    *,
    run: Run,
    call: ToolCall,
    spec: ToolSpec,
    need: Need,
    request: CallRequest,
    holds: Sequence[Hold] = (),
) -> CallAnswer | OverLimit:
    """Hold a call for a person: its key is claimed (so the same request again is the
    same pending call, never a second approval), its approval opened and its spend
    reserved (`holds`), in one transaction; nothing is sent. The claim's lease outlives
    the approval, so no sweep takes it over while a person decides. OverLimit (nothing
    written) when a hold did not fit under its limit."""
    call.status = ToolCall.Status.PENDING_APPROVAL
    call.feedback = feedback.pending_approval(
        spec.name, need.reason, rule=need.rule, over_limit=need.over_limit
    )
    try:
        with transaction.atomic():
            # Locked, and still running: an abort or complete committed since this request
            # read the run would otherwise miss a call held after it.
            if (
                not Run.objects.select_for_update()
                .filter(pk=run.pk, status=Run.Status.RUNNING)
                .exists()
            ):
                run.refresh_from_db(fields=["status"])
                raise RunNotRunning(run)
            call.approval = _approval_open(run=run, call=call, need=need)
            claimed = claim(
                call,
                lease_s=need.ttl_s + HOLD_LEASE_MARGIN_S,
                ttl_s=claims.ttl_s(),
                charge=None,
                holds=holds,
            )
            if claimed.over:
                raise _Over(claimed.over)
            if not claimed.won:
                raise _LostClaim
            # Its searchable args find it while it waits (an e-mail a reviewer is given);
            # its result's values join them when it is recorded (record.py).
            traces.search_keys_save(traces.search_keys(call, spec))
            # The call is accepted: its tokens count now, once.
            charge_run(run, attempts=0, tokens=request.tokens)
    except _Over as over:
        # Rolled back: the approval opened above does not exist.
        call.approval = None
        call.status = ToolCall.Status.IN_PROGRESS
        return OverLimit(over.indexes)
    except _LostClaim:
        return replay.follow(run=run, spec=spec, key=call.idempotency_key, wait=request.wait)
    except IntegrityError as exc:
        if not is_tool_call_id_clash(exc):
            raise
        existing = replay.by_tool_call_id(run, request)
        return replay.answer_existing(existing, request, call.args_digest, spec)
    traces.run_changed(run_pk=run.pk)
    return CallAnswer(call, replayed=False)


class _LostClaim(Exception):
    pass


class _Over(Exception):
    def __init__(self, indexes: tuple[int, ...]) -> None:
        self.indexes = indexes


@dataclass(frozen=True)
class OverLimit:
    """A hold that did not fit: the indexes of the holds that were over their limits."""

    indexes: tuple[int, ...]


def _approval_open(*, run: Run, call: ToolCall, need: Need) -> Approval:
    """The approval a held call waits on (inside the hold's transaction, with the call's
    claim: a held call without its approval must never exist)."""
    approval = Approval.objects.create(
        run=run,
        tool=call.tool,
        reason=need.reason,
        duplicate_of_id=need.duplicate_of,
        args_hash=call.args_digest,
        approvals_required=need.approvals_required,
        expires_at=dbclock.now() + timedelta(seconds=need.ttl_s),
        rule=need.rule[:200],
        policy_version=need.policy_version,
    )
    live.changed(group=LIVE_GROUP, item=approval.pk)
    # Recorded with the hold: a rolled-back hold tells nobody.
    notify.approval_waiting(approval_id=approval.approval_id)
    return approval


def takes_run_past_max_tokens(run: Run, tokens: int) -> bool:
    """Such a call is counted but never run (API.md): it takes the ordinary path, which
    ends it `budget_exhausted`, rather than waiting for a person first."""
    return bool(tokens) and run.max_tokens is not None and run.tokens_used + tokens > run.max_tokens


def held_call_release(*, call: ToolCall, expired: bool, by_person: bool, note: str) -> bool:
    """End a held call that will never run — its approval rejected or expired, or its run
    ended first — and record its claim, so the same request again answers this ending.
    False when the call no longer waited (nothing changed)."""
    message = "approval expired" if expired else f"rejected: {note}" if note else "rejected"
    if expired:
        text = feedback.expired(call.tool)
    elif by_person:
        text = feedback.rejected(call.tool, note)
    else:
        text = feedback.run_ended(call.tool, note)
    fields = {
        "status": ToolCall.Status.REJECTED,
        "error_class": "fatal",
        "error_reason": ToolCall.Reason.EXPIRED if expired else ToolCall.Reason.REJECTED,
        "error_message": message[:2000],
        "feedback": text,
        "finished_at": timezone.now(),
    }
    ended = ToolCall.objects.filter(pk=call.pk, status__in=ToolCall.WAITING).update(**fields)
    if ended and call.policy_holds:
        # Not done: its reserved spend is free again.
        spend.give_back(call.run.agent_id, call.policy_holds)
    if ended:
        for name, value in fields.items():
            setattr(call, name, value)
        traces.call_export(call=call)
    if call.idempotency_key:
        claims.close(key=call.idempotency_key)
    traces.run_changed(run_pk=call.run_id)
    return bool(ended)
