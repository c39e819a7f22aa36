"""What needs a person now: the reads behind the console's home (toolops/views/home.py).

One small read per signal, each bounded whatever the tables hold (bench/flat_console.py
renders the home at 10 million calls): a COUNT with a MIN or MAX over rows picked by an
indexed status (open tickets, pending approvals, unknown calls, failed deliveries — sets
that stay small unless something is wrong), and at most FEW rows, oldest first. A signal
with nothing in it costs its one COUNT.

Which signals a person gets follows what they may work, checked here (`attention_for`):
operators (and superusers) everything — breakers, unknown outcomes, failing notifications,
and whether the reviewers' and support's queues back up; reviewers the approvals waiting;
support the open tickets. A signal links to where it is worked only for those who may open
that page (`may_open`); an operator sees that tickets wait without a link that would 403."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Count, Max, Min, Q
from django.urls import reverse

from compensations.models import Ticket
from toolops.approvals.models import Approval
from toolops.audit.models import AuditEntry
from toolops.breaker_state import BreakerState, breaker_states
from toolops.models import CircuitBreaker, Run, ToolCall
from toolops.notify.models import NotificationDelivery
from toolops.permissions import can_control_breakers, can_read_audit, can_review, can_work_tickets
from toolops.policy import active as in_force
from toolops.templatetags.when import ago, waited
from toolops.views.policy_spend import IN_PERIOD, NEAR, spent_now

# The oldest (or newest) rows a signal lists; its count says how many there are in all.
FEW = 5
# An approval waiting this long, or ending this soon, is one an operator should know of
# (the default approval lasts 30 min; notify/watch.py announces the end 5 min before).
LONG_WAIT = timedelta(minutes=10)
EXPIRING_SOON = timedelta(minutes=5)


@dataclass(frozen=True)
class Moment:
    """A time as the home shows it: absolute (`{% when %}`) and in words beside it."""

    at: datetime
    said: str  # "3 min ago", "in 4 min"


def past(at: datetime, now: datetime) -> Moment:
    return Moment(at, ago(at, now))


def future(at: datetime, now: datetime) -> Moment:
    if at - now < timedelta(minutes=1):
        return Moment(at, "within a minute" if at > now else "now")
    return Moment(at, f"in {waited(now, at)}")


@dataclass(frozen=True)
class OpenBreaker:
    shown: BreakerState  # as the next call would see it (every page's reading)
    since: Moment | None
    until: Moment | None
    reason: str


@dataclass(frozen=True)
class Tickets:
    count: int
    unassigned: int
    oldest: Ticket
    oldest_since: Moment
    may_open: bool


@dataclass(frozen=True)
class HeldApproval:
    approval: Approval
    held: Moment
    ends: Moment


@dataclass(frozen=True)
class Approvals:
    count: int  # pending, in all
    long: int  # waiting LONG_WAIT or more
    expiring: int  # ending within EXPIRING_SOON
    oldest_since: Moment
    few: list[HeldApproval]  # the oldest; for operators only the long or ending ones
    may_open: bool


@dataclass(frozen=True)
class Unknown:
    count: int
    oldest_since: Moment


@dataclass(frozen=True)
class Notifications:
    failed: int
    retrying: int  # waiting for their next try after a failed one
    newest: NotificationDelivery | None  # the newest failed, with its error
    newest_since: Moment | None


@dataclass(frozen=True)
class NearSpendLimit:
    """An agent close to a spend limit (`agents_near_spend_limit`)."""

    agent: str
    spent: str
    limit: str
    link: str


@dataclass
class Attention:
    breakers: list[OpenBreaker] = field(default_factory=list)
    tickets: Tickets | None = None
    approvals: Approvals | None = None
    unknown: Unknown | None = None
    notifications: Notifications | None = None
    near_spend_limit: list[NearSpendLimit] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (
            self.breakers
            or self.tickets
            or self.approvals
            or self.unknown
            or self.notifications
            or self.near_spend_limit
        )


def attention_for(*, user: Any, now: datetime) -> Attention:
    """Every signal `user` gets (module docstring), each None or empty when all is well."""
    operator = can_control_breakers(user)
    reviewer, support = can_review(user), can_work_tickets(user)
    found = Attention()
    if operator:
        found.breakers = open_breakers(now)
        found.unknown = unknown_waiting(now)
        found.notifications = notifications_failing(now)
        found.near_spend_limit = agents_near_spend_limit()
    if operator or support:
        found.tickets = tickets_waiting(now, may_open=support)
    if operator or reviewer:
        found.approvals = approvals_waiting(now, all_of_them=reviewer, may_open=reviewer)
    return found


def open_breakers(now: datetime) -> list[OpenBreaker]:
    """Every breaker that is not closed as the next call sees it: one read of the breaker
    rows (one per tool that ever tripped), and their reasons only when any is open."""
    shown = [state for state in breaker_states().values() if state.state != "closed"]
    if not shown:
        return []
    rows = CircuitBreaker.objects.filter(tool__in=[s.tool for s in shown])
    opened = {tool: (at, why) for tool, at, why in rows.values_list("tool", "opened_at", "reason")}
    found = []
    for state in sorted(shown, key=lambda s: s.tool):
        at, why = opened.get(state.tool, (None, ""))
        found.append(
            OpenBreaker(
                shown=state,
                since=past(at, now) if at else None,
                until=future(state.until, now) if state.until else None,
                reason=why,
            )
        )
    return found


def tickets_waiting(now: datetime, *, may_open: bool) -> Tickets | None:
    """Open tickets not snoozed: how many, how many with nobody on them, and the oldest."""
    counts = Ticket.objects.awake(now).aggregate(
        count=Count("pk"), unassigned=Count("pk", filter=Q(assignee__isnull=True))
    )
    if not counts["count"]:
        return None
    oldest = (
        Ticket.objects.awake(now)
        .only("pk", "tool", "opened_at")
        .order_by("opened_at", "pk")
        .first()
    )
    if oldest is None:  # closed between the two reads
        return None
    return Tickets(
        counts["count"], counts["unassigned"], oldest, past(oldest.opened_at, now), may_open
    )


def approvals_waiting(now: datetime, *, all_of_them: bool, may_open: bool) -> Approvals | None:
    """Pending approvals. For a reviewer every one is theirs to decide (`all_of_them`);
    for an operator only those waiting long or ending soon are worth a look."""
    pending = Approval.objects.pending()
    urgent = Q(created_at__lte=now - LONG_WAIT) | Q(expires_at__lte=now + EXPIRING_SOON)
    counts = pending.aggregate(
        count=Count("pk"),
        long=Count("pk", filter=Q(created_at__lte=now - LONG_WAIT)),
        expiring=Count("pk", filter=Q(expires_at__lte=now + EXPIRING_SOON)),
        oldest=Min("created_at"),
    )
    if not counts["count"] or not (all_of_them or counts["long"] or counts["expiring"]):
        return None
    listed = pending if all_of_them else pending.filter(urgent)
    few = listed.only("approval_id", "tool", "created_at", "expires_at").order_by(
        "created_at", "pk"
    )[:FEW]
    return Approvals(
        counts["count"],
        counts["long"],
        counts["expiring"],
        past(counts["oldest"], now),
        [HeldApproval(a, past(a.created_at, now), future(a.expires_at, now)) for a in few],
        may_open,
    )


def unknown_waiting(now: datetime) -> Unknown | None:
    """Agent calls whose outcome is unknown: how many, and since when the oldest."""
    counts = (
        ToolCall.objects.agent_calls()
        .filter(status=ToolCall.Status.UNKNOWN)
        .aggregate(count=Count("pk"), oldest=Min("created_at"))
    )
    if not counts["count"]:
        return None
    return Unknown(counts["count"], past(counts["oldest"], now))


def notifications_failing(now: datetime) -> Notifications | None:
    """Deliveries that failed (until an operator's Send again, as /metrics counts them)
    and those waiting for another try after a failed one; the newest failure's error."""
    Status = NotificationDelivery.Status
    rows = NotificationDelivery.objects.filter(status__in=[Status.FAILED, Status.PENDING])
    counts = rows.aggregate(
        failed=Count("pk", filter=Q(status=Status.FAILED)),
        retrying=Count("pk", filter=Q(status=Status.PENDING, attempts__gt=0)),
        newest=Max("created_at", filter=Q(status=Status.FAILED)),
    )
    if not (counts["failed"] or counts["retrying"]):
        return None
    newest = None
    if counts["failed"]:
        newest = (
            NotificationDelivery.objects.filter(status=Status.FAILED)
            .only("pk", "channel", "target", "last_error", "created_at")
            .order_by("-created_at", "-pk")
            .first()
        )
    since = past(newest.created_at, now) if newest is not None else None
    return Notifications(counts["failed"], counts["retrying"], newest, since)


def agents_near_spend_limit() -> list[NearSpendLimit]:
    """Agents at NEAR (80%) or more of a limit of the policy in force, this period: one
    read of the version in force and one of the counters past that share (policy_spend.py),
    the FEW fullest, each agent once (its fullest limit), linking to the policy page."""
    policy = in_force.current()
    if policy is None or not policy.document.limits:
        return []
    link = reverse("console:policy") + "#active"
    found: dict[str, NearSpendLimit] = {}
    for spent in spent_now(policy.document.limits, share=NEAR):
        if spent.agent not in found and len(found) < FEW:
            limit = spent.limit
            said = f"{spent.max} ({spent.percent}% of “{limit.name}”, {IN_PERIOD[limit.per]})"
            found[spent.agent] = NearSpendLimit(spent.agent, spent.spent, said, link)
    return list(found.values())


@dataclass(frozen=True)
class Lately:
    """The last few things that happened, for a home with nothing to do: (item, when)."""

    runs: list[tuple[Run, Moment]]
    actions: list[tuple[AuditEntry, Moment]]  # for those who may read the audit log


def lately_for(*, user: Any, now: datetime) -> Lately:
    runs = Run.objects.select_related("agent").order_by("-created_at", "-pk")[:FEW]
    actions = AuditEntry.objects.order_by("-id")[:FEW] if can_read_audit(user) else []
    return Lately(
        [(run, past(run.created_at, now)) for run in runs],
        [(entry, past(entry.at, now)) for entry in actions],
    )
