"""Reads that also check access."""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.db import connection
from django.db.models import Count, Q, Sum
from django.db.models.functions import Coalesce
from django.http import Http404

from toolops.approvals import services as approval_services
from toolops.executor import breaker, claims
from toolops.models import Agent, Run, ToolCall
from toolops.rows import RowLoader

# \Z, not $: "$" also matches before a trailing newline, and "run-1\n" is not run-1.
ID_RE = re.compile(r"^[A-Za-z0-9._:-]{1,128}\Z")


def check_id(value: str, what: str) -> None:
    """A malformed id in a URL path answers 404, like an id that is not the agent's."""
    if not ID_RE.match(value):
        raise Http404(f"no such {what}")


def run_get_for_agent(
    *,
    agent: Agent,
    run_id: str,
    tool_call_id: str | None = None,
    tool: str | None = None,
    idempotency_key: str | None = None,
    duplicate_probe: tuple[str, str, int] | None = None,
) -> Run:
    """The agent's own run; another agent's, a missing or a malformed id → 404.

    For a call, the same query also reads whether the run already has a call with that
    `tool_call_id` (`run.existing_call_pk`) and the `tool`'s breaker (`run.breaker_state`):
    two round trips fewer on every call. With `idempotency_key`, it also reads that key's
    claim and call (`run.claim_hit`), so that a replay is answered by this one query.
    With `duplicate_probe` (tool, args digest, window in seconds), it also reads the
    earlier call this one may repeat in another run of the session
    (`run.session_duplicate_pk`), for the approval gate."""
    check_id(run_id, "run")
    # On every call: hand-written, since compiling this query costs more than running it.
    existing = (
        "(SELECT c.id FROM toolops_toolcall c WHERE c.run_id = r.id AND c.tool_call_id = %s)"
        if tool_call_id is not None
        else "NULL"
    )
    columns, joins = "", ""
    # Parameters in the order they appear: the select list's, then the joins'.
    params: list[object] = [tool_call_id] if tool_call_id is not None else []
    join_params: list[object] = []
    if tool is not None:
        columns += f", {breaker.state_sql('b')}"
        joins += "LEFT JOIN toolops_circuitbreaker b ON b.tool = %s "
        join_params.append(tool)
    if duplicate_probe is not None:
        columns += f", {approval_services.duplicate_sql('r')}"
        params.extend(approval_services.duplicate_params(*duplicate_probe))
    if idempotency_key is not None:
        columns += f", {claims.with_call_sql('k', 'kc')}"
        joins += (
            'LEFT JOIN toolops_idempotencyrecord k ON k."key" = %s '
            "LEFT JOIN toolops_toolcall kc ON kc.call_id = k.call_ref "
        )
        join_params.append(idempotency_key)
    sql = (
        f"SELECT {_runs.columns('r')}, {existing}{columns} "
        f"FROM toolops_run r {joins}WHERE r.agent_id = %s AND r.run_id = %s"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [*params, *join_params, agent.pk, run_id])
        row = cursor.fetchone()
    if row is None:
        raise Http404("no such run")
    run = _runs.load(row)
    extra = row[len(_runs.fields) :]
    if tool_call_id is not None:
        run.existing_call_pk = extra[0]
    extra = extra[1:]
    if tool is not None:
        width = len(breaker.STATE_COLUMNS)
        run.breaker_state, extra = tuple(extra[:width]), extra[width:]
    if duplicate_probe is not None:
        run.session_duplicate_pk, extra = extra[0], extra[1:]
    if idempotency_key is not None:
        run.claim_hit = claims.with_call_from_row(extra)
    return run


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
    from toolops.summary import PARTIAL, WAITING

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
