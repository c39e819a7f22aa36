"""Reads of the saga that check access or shape answers."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import Count, Prefetch, Q, QuerySet
from django.utils import timezone

from compensations.models import Compensation, Ticket, TicketEvent
from toolops import executor
from toolops.models import Attempt, Run, ToolCall
from toolops.permissions import SUPPORT
from toolops.templatetags.when import at_words
from toolops.tools.spec import ToolSpec
from toolops.tools.wording import service_name

# The queue's age filter (TicketFilterForm): tickets opened at least this long ago.
AGES = {"1h": timedelta(hours=1), "1d": timedelta(days=1), "7d": timedelta(days=7)}


def run_compensations(*, run: Run) -> list[dict[str, Any]]:
    """The run's compensations as API.md shows them, in registration order."""
    rows = (
        Compensation.objects.filter(run=run)
        .order_by("pk")
        .values_list("tool", "status", "call__tool_call_id")
    )
    return [{"tool": t, "status": s, "for_tool_call_id": tc} for t, s, tc in rows]


# -- the support desk ---------------------------------------------------------------------

QUEUE_LIMIT = 200


def ticket_queue(
    *, filters: dict[str, Any], user: Any, now: datetime | None = None
) -> QuerySet[Ticket]:
    """Tickets matching the desk's filters, oldest first (the longest wait is first).
    "open" leaves out the snoozed ones, "snoozed" shows only them (judged at `now`)."""
    now = now or timezone.now()
    tickets = Ticket.objects.select_related("run", "assignee", "compensation__call")
    status = filters.get("status", "open")
    if status == "open":
        tickets = tickets.awake(now)
    elif status == "snoozed":
        tickets = tickets.snoozed(now)
    elif status != "all":
        tickets = tickets.filter(status=status)
    if filters.get("tool"):
        tickets = tickets.filter(tool=filters["tool"])
    if filters.get("age") in AGES:
        tickets = tickets.filter(opened_at__lte=timezone.now() - AGES[filters["age"]])
    if filters.get("assignee") == "none":
        tickets = tickets.filter(assignee__isnull=True)
    elif filters.get("assignee"):
        tickets = tickets.filter(assignee__username=filters["assignee"])
    if filters.get("mine"):
        tickets = tickets.filter(assignee=user)
    return tickets.order_by("opened_at", "pk")


def ticket_counts(now: datetime | None = None) -> dict[str, int]:
    """Tickets per tab (open and awake, snoozed, closed), and the awake open ones nobody
    holds, in one query."""
    now = now or timezone.now()
    is_open = Q(status=Ticket.Status.OPEN)
    asleep = is_open & Q(snoozed_until__gt=now)
    awake = is_open & ~Q(snoozed_until__gt=now)
    return Ticket.objects.aggregate(
        open=Count("pk", filter=awake),
        snoozed=Count("pk", filter=asleep),
        closed=Count("pk", filter=Q(status=Ticket.Status.CLOSED)),
        unassigned=Count("pk", filter=awake & Q(assignee__isnull=True)),
    )


def ticket_workers() -> QuerySet[Any]:
    """The people a ticket may be assigned to: active support staff and superusers, as
    toolops/permissions.py `can_work_tickets` says."""
    may = Q(is_superuser=True) | Q(groups__name=SUPPORT)
    users = get_user_model().objects.filter(may, is_active=True)
    return users.distinct().order_by("username")


@dataclass
class Round:
    """One round of an undo: the executor call and its attempts."""

    number: int
    call: ToolCall
    attempts: list[Attempt]
    error: str = ""  # the round's error as a sentence naming the service (set by the page)


def ticket_rounds(*, ticket: Ticket) -> list[Round]:
    """Every round of the ticket's compensation, oldest first, with its attempts."""
    prefix = f"~undo:{ticket.compensation.call.call_id}:"
    calls = (
        ToolCall.objects.filter(
            run_id=ticket.run_id, role=ToolCall.Role.UNDO, tool_call_id__startswith=prefix
        )
        .prefetch_related("attempt_rows")
        .order_by("created_at", "pk")
    )
    return [
        Round(
            number=int(c.tool_call_id.rsplit(":", 1)[1]),
            call=c,
            attempts=list(c.attempt_rows.all()),
        )
        for c in calls
    ]


# -- the undo tool's health, on a ticket ------------------------------------------------------


@dataclass
class UndoHealth:
    """Whether a Retry can work now: the undo tool's breaker (one state, as the executor
    admits calls: an open breaker past its cool-down lets the next call through) and its
    last successful and failed attempts."""

    service: str
    open_until: datetime | None
    last_success: datetime | None
    last_failure: datetime | None
    # The breaker as every page says it ("open — cooling down until 12:03 UTC").
    breaker: str = "closed"
    now: datetime | None = None  # when it was read: "until 12:03 UTC (in 4 min)"

    @property
    def retry_can_work(self) -> bool:
        return self.open_until is None

    @property
    def answering(self) -> bool:
        return self.last_success is not None and (
            self.last_failure is None or self.last_success > self.last_failure
        )

    @property
    def sentence(self) -> str:
        the = f"The {self.service} service"
        if self.open_until is not None:
            until = at_words(self.open_until, self.now or timezone.now())
            return f"{the} is failing: breaker open until {until}; a Retry waits until then."
        if self.answering:
            again = " again" if self.last_failure is not None else ""
            return f"{the} is answering{again}: Retry should work."
        if self.last_failure is not None:
            return f"{the} failed on its last call and has not answered since: Retry may fail."
        return f"Nothing was sent to the {self.service} service lately: Retry should reach it."


def retry_at(compensation: Compensation, now: datetime) -> datetime | None:
    """A queued round waiting for its undo tool's breaker: when the worker starts it."""
    waiting = compensation.status == Compensation.Status.PENDING
    if waiting and compensation.not_before is not None and compensation.not_before > now:
        return compensation.not_before
    return None


def undo_health(*, tool: str, spec: ToolSpec | None, now: datetime | None = None) -> UndoHealth:
    """The undo tool's health now: three small reads on the breaker and (tool, started_at)."""
    attempts = Attempt.objects.filter(tool=tool).order_by("-started_at")
    breaker = executor.breaker_state_of(executor.breaker_states(), tool)
    return UndoHealth(
        now=now,
        service=service_name(tool, spec),
        open_until=breaker.until if breaker.refuses else None,
        breaker=breaker.label,
        last_success=attempts.filter(health=Attempt.Health.SUCCESS)
        .values_list("started_at", flat=True)
        .first(),
        last_failure=attempts.filter(health=Attempt.Health.FAILURE)
        .values_list("started_at", flat=True)
        .first(),
    )


# -- the desk's Resolved tab -------------------------------------------------------------------

HISTORY_PER_PAGE = 50
# The events that close a ticket, and how the desk says each.
CLOSING = {
    "succeeded": "retried and succeeded",
    "resolved": "fixed by hand",
    "closed": "closed",
}


@dataclass
class Closed:
    """A closed ticket as the Resolved tab shows it: who closed it, how, and the note."""

    ticket: Ticket
    by: str  # a username, or "ToolOps" for the worker's successful retry
    how: str
    note: str


def ticket_history() -> QuerySet[Ticket]:
    """Closed tickets, newest closing first, each with its run, undone call and the
    events that closed it (one query for the page, one for their closings)."""
    closings = TicketEvent.objects.filter(kind__in=CLOSING).select_related("actor")
    return (
        Ticket.objects.filter(status=Ticket.Status.CLOSED)
        .select_related("run", "compensation__call")
        .defer("compensation__args", "compensation__call__args", "compensation__call__result")
        .prefetch_related(
            Prefetch("events", queryset=closings.order_by("-created_at", "-pk"), to_attr="closings")
        )
        .order_by("-closed_at", "-pk")
    )


def closed_row(ticket: Ticket) -> Closed:
    """The last closing event says who and how (a reopened ticket closes again)."""
    closings: list[TicketEvent] = getattr(ticket, "closings", None) or []  # the Prefetch's
    event = closings[0] if closings else None
    if event is None:
        return Closed(ticket, by="—", how="closed", note="")
    by = event.actor.get_username() if event.actor else "ToolOps"
    return Closed(ticket, by=by, how=CLOSING[event.kind], note=event.text)
