"""Reads that also check access."""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.db import connection
from django.db.models import Count, Q, Sum
from django.db.models.functions import Coalesce
from django.http import Http404

from toolops.models import Agent, Run, ToolCall
from toolops.rows import RowLoader
from toolops.summary import PARTIAL, WAITING

# \Z, not $: "$" also matches before a trailing newline, and "run-1\n" is not run-1.
ID_RE = re.compile(r"^[A-Za-z0-9._:-]{1,128}\Z")


def check_id(value: str, what: str) -> None:
    """A malformed id in a URL path answers 404, like an id that is not the agent's."""
    if not ID_RE.match(value):
        raise Http404(f"no such {what}")


def run_get_for_agent(*, agent: Agent, run_id: str) -> Run:
    """The agent's own run; another agent's, a missing or a malformed id → 404. A call
    reads its run with more in the same query (toolops.executor.read_context)."""
    check_id(run_id, "run")
    # On every look: hand-written, since compiling this query costs more than running it.
    sql = f"SELECT {_runs.columns('r')} FROM toolops_run r WHERE r.agent_id = %s AND r.run_id = %s"
    with connection.cursor() as cursor:
        cursor.execute(sql, [agent.pk, run_id])
        row = cursor.fetchone()
    if row is None:
        raise Http404("no such run")
    return _runs.load(row)


_runs = RowLoader(Run)


def call_get_for_agent(*, agent: Agent, call_id: str) -> ToolCall:
    check_id(call_id, "call")
    try:
        return ToolCall.objects.select_related(
            "run", "approval__decided_by", "approval__duplicate_of"
        ).get(call_id=call_id, run__agent=agent)
    except ToolCall.DoesNotExist:
        raise Http404("no such call") from None


# -- a run's calls, a page at a time (API.md: at most 1,000 in step order) --------------

CALLS_PAGE = 1000
STEP_ORDER = ("step_index", "created_at", "pk")
# What the summary needs of a call, for the few a long run's summary names.
SUMMARY_FIELDS = ("tool", "tool_call_id", "status", "error_reason", "step_index", "created_at")


@dataclass(frozen=True)
class CallsPage:
    calls: list[ToolCall]
    whole: bool  # every call of the run, nothing before or after
    next_after: str | None  # the call_id the next page starts after


class UnknownCursor(Exception):
    """`calls_after` names no call of the run."""


def run_calls_page(*, run: Run, after: str | None = None, size: int = CALLS_PAGE) -> CallsPage:
    """Up to `size` of the run's calls in step order, after the call `after` names."""
    calls = (
        run.calls.agent_calls()
        .select_related("approval__decided_by", "approval__duplicate_of")
        .order_by(*STEP_ORDER)
    )
    if after is not None:
        cursor = run.calls.agent_calls().filter(call_id=after).values_list(*STEP_ORDER).first()
        if cursor is None:
            raise UnknownCursor(after)
        step, created, pk = cursor
        calls = calls.filter(
            Q(step_index__gt=step)
            | Q(step_index=step, created_at__gt=created)
            | Q(step_index=step, created_at=created, pk__gt=pk)
        )
    rows = list(calls[: size + 1])  # one more than a page: is there another?
    more = len(rows) > size
    rows = rows[:size]
    return CallsPage(
        calls=rows,
        whole=after is None and not more,
        next_after=rows[-1].call_id if more else None,
    )


@dataclass(frozen=True)
class CallsTally:
    """A run's calls summed up by the database, for a run too long to load whole."""

    total: int
    ok: int
    attempts: int
    tokens: int
    problems_total: int
    problems: list[ToolCall]  # the first five, in step order
    waiting: list[ToolCall]  # the first five
    last_succeeded: str | None


def run_calls_tally(*, run: Run) -> CallsTally:
    """Four queries, whatever the run's length."""
    calls = run.calls.agent_calls()
    counts = calls.aggregate(
        total=Count("pk"),
        ok=Count("pk", filter=Q(status=ToolCall.Status.SUCCEEDED)),
        problems=Count("pk", filter=Q(status__in=PARTIAL)),
        attempts=Coalesce(Sum("attempts"), 0),
        tokens=Coalesce(Sum("tokens"), 0),
    )
    few = calls.only(*SUMMARY_FIELDS).order_by(*STEP_ORDER)
    # Where the run stopped: the furthest step that succeeded (summary.last_succeeded).
    last = (
        calls.filter(status=ToolCall.Status.SUCCEEDED)
        .order_by("-step_index", "-created_at", "-pk")
        .values_list("tool_call_id", flat=True)
        .first()
    )
    return CallsTally(
        total=counts["total"],
        ok=counts["ok"],
        attempts=counts["attempts"],
        tokens=counts["tokens"],
        problems_total=counts["problems"],
        problems=list(few.filter(status__in=PARTIAL)[:5]),
        waiting=list(few.filter(status__in=WAITING)[:5]),
        last_succeeded=last,
    )
