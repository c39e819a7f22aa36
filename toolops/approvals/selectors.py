"""Reads for the reviewer queue and an approval's page. Access is checked by the views
(toolops.permissions.require_reviewer) before any of these run."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import Count, Exists, OuterRef, Q, QuerySet
from django.utils import timezone

from toolops.approvals.models import Approval, ApprovalVote
from toolops.models import Run, ToolCall

# More than this many waiting at once is an incident, not a queue to page through.
QUEUE_LIMIT = 200
# The earlier steps shown on an approval's page: the nearest ones.
EARLIER_LIMIT = 100

APPROVE = ApprovalVote.Decision.APPROVE


def approval_queue(*, filters: dict[str, Any], user: Any) -> QuerySet[Approval]:
    """Pending approvals matching the queue's filters, oldest first (the longest wait is
    first), each with its held call, run and agent, how many approvals it has, and whether
    `user` already voted on it. One query."""
    approvals = (
        Approval.objects.pending()
        .select_related("run__agent", "call")
        .defer("call__result")  # possibly large, and not shown in the queue
        .annotate(
            approved=Count("votes", filter=Q(votes__decision=APPROVE)),
            mine=Exists(ApprovalVote.objects.filter(approval=OuterRef("pk"), reviewer=user)),
        )
    )
    if filters.get("tool"):
        approvals = approvals.filter(tool=filters["tool"])
    if filters.get("agent"):
        approvals = approvals.filter(run__agent_id=filters["agent"])
    if filters.get("reason"):
        approvals = approvals.filter(reason=filters["reason"])
    return approvals.order_by("created_at", "pk")


def approval_counts() -> dict[str, int]:
    """Pending approvals in all, per reason, and past their time (the worker ends those
    within a minute), in one query on the (status, created_at) index."""
    reasons = Approval.Reason
    return Approval.objects.pending().aggregate(
        pending=Count("pk"),
        irreversible=Count("pk", filter=Q(reason=reasons.IRREVERSIBLE)),
        policy=Count("pk", filter=Q(reason=reasons.POLICY)),
        possible_duplicate=Count("pk", filter=Q(reason=reasons.POSSIBLE_DUPLICATE)),
        overdue=Count("pk", filter=Q(expires_at__lte=timezone.now())),
    )


def approvals_waiting_for(*, user: Any, other_than: Approval) -> QuerySet[Approval]:
    """The approvals `user` can still decide, other than `other_than`, oldest first: the
    queue as this reviewer works it (not past their time, not voted on by them)."""
    return (
        Approval.objects.pending()
        .filter(expires_at__gt=timezone.now())
        .exclude(pk=other_than.pk)
        .exclude(votes__reviewer=user)
        .order_by("created_at", "pk")
    )


@dataclass(frozen=True)
class Next:
    """Where a reviewer goes once a decision is made: the oldest approval left to them,
    and how many wait for them in all ("next: 1 of 2 waiting")."""

    approval: Approval | None
    waiting: int


def approval_next(*, user: Any, after: Approval) -> Next:
    """The oldest approval `user` can still decide, other than `after`, and how many they
    can: two queries on the (status, created_at) index."""
    waiting = approvals_waiting_for(user=user, other_than=after)
    following = waiting.only("approval_id").first()
    return Next(following, waiting.count() if following is not None else 0)


def approvals_for_page() -> QuerySet[Approval]:
    """Approvals with what their page shows in the same query: the held call, its run and
    agent, the possible duplicate and its run, and who decided."""
    return Approval.objects.select_related("run__agent", "call", "duplicate_of__run", "decided_by")


def approval_for_page(*, approval_id: str) -> Approval | None:
    """One approval with what its page shows (approvals_for_page), None if unknown."""
    return approvals_for_page().filter(approval_id=approval_id).first()


def held_call(approval: Approval) -> ToolCall | None:
    """The call that waits (or waited) on `approval`; None if it is gone."""
    try:
        return approval.call
    except ToolCall.DoesNotExist:
        return None


def approval_votes(*, approval: Approval) -> list[ApprovalVote]:
    """Every vote so far, oldest first, with its reviewer."""
    return list(approval.votes.select_related("reviewer"))


@dataclass
class Votes:
    """The votes as the page shows them: "1 of 2 approvals: rita"."""

    all: list[ApprovalVote]
    approvers: list[str]
    rejecters: list[str]
    mine: ApprovalVote | None


def votes_summary(*, approval: Approval, user: Any) -> Votes:
    votes = approval_votes(approval=approval)
    return Votes(
        all=votes,
        approvers=[v.reviewer.get_username() for v in votes if v.decision == APPROVE],
        rejecters=[v.reviewer.get_username() for v in votes if v.decision != APPROVE],
        mine=next((v for v in votes if v.reviewer_id == user.pk), None),
    )


def earlier_calls(*, call: ToolCall, run: Run) -> list[ToolCall]:
    """What the agent did in this conversation before `call` (of `run`): the agent calls
    of `run` before it (a lower step_index, or made before it), and those of every other
    run of the same agent and session_key made before it — the order made in another run
    of the conversation, say. Oldest first (newest last), each with its run; at most the
    EARLIER_LIMIT nearest, read newest first on the (run, created_at) index."""
    if run.session_key:
        runs = Q(run__agent_id=run.agent_id, run__session_key=run.session_key)
    else:
        runs = Q(run_id=run.pk)
    before = Q(created_at__lt=call.created_at) | Q(run_id=run.pk, step_index__lt=call.step_index)
    calls = list(
        ToolCall.objects.agent_calls()
        .filter(runs)
        .filter(before)
        .exclude(pk=call.pk)
        .select_related("run")
        .order_by("-created_at", "-pk")[:EARLIER_LIMIT]
    )
    return sorted(calls, key=lambda c: (c.created_at, c.pk))


# -- the queue's history tabs ----------------------------------------------------------------

# Tab → the statuses it lists: decided by a person (or by the run's ending), or expired.
HISTORY_TABS = {
    "decided": (Approval.Status.APPROVED, Approval.Status.REJECTED),
    "expired": (Approval.Status.EXPIRED,),
}
HISTORY_PER_PAGE = 50


def approval_history(*, tab: str) -> QuerySet[Approval]:
    """The approvals a history tab lists, newest ending first, each with its held call,
    run, agent and decider: one query per page."""
    return (
        Approval.objects.filter(status__in=HISTORY_TABS[tab])
        .select_related("run__agent", "call", "decided_by")
        .defer("call__result")  # possibly large, and not shown
        .order_by("-decided_at", "-pk")
    )


def approval_tab_counts() -> dict[str, int]:
    """How many each tab lists, in one query."""
    return Approval.objects.aggregate(
        waiting=Count("pk", filter=Q(status=Approval.Status.PENDING)),
        decided=Count("pk", filter=Q(status__in=HISTORY_TABS["decided"])),
        expired=Count("pk", filter=Q(status__in=HISTORY_TABS["expired"])),
    )
