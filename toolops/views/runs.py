"""The runs list, aborting a run, and finding a run by any of its ids. A run's own page is
its timeline (traces/views/timeline.py)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, TypedDict, overload

from django.contrib import messages
from django.core.paginator import Paginator
from django.db.models import Prefetch, Q, QuerySet
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from compensations.models import Compensation
from toolops import services
from toolops.dbconn import custom_plans
from toolops.forms import AbortRunForm, RunFilterForm
from toolops.idle import idle_text
from toolops.models import Agent, Run, ToolCall
from toolops.permissions import can_review, console_required, require_run_aborter
from toolops.summary import ABORT_STATES, abort_text, run_summary
from toolops.views.common import HtmxHttpRequest, first_sentence, page_context
from traces.console import search as run_search
from traces.console.timeline import call_page_url

RUNS_PER_PAGE = 50
# What the summary needs from each call, and no more (args and results can be large).
SUMMARY_FIELDS = (
    "run_id",
    "tool",
    "tool_call_id",
    "status",
    "error_reason",
    "created_at",
    "finished_at",
)


class Summaries(TypedDict):
    """What the list's query prefetches onto each run (its Prefetch to_attr)."""

    summary_calls: list[ToolCall]
    summary_undo: list[Compensation]


if TYPE_CHECKING:
    from django_stubs_ext import WithAnnotations

    ListedRun = WithAnnotations[Run, Summaries]


@dataclass(frozen=True)
class RunRow:
    """A run as the list shows it (templates/console/runs.html)."""

    pk: int
    run_id: str
    agent: Agent
    status: str
    created_at: datetime
    calls_count: int
    summary_head: str
    idle: str  # "" unless the run looks abandoned (toolops/idle.py)


# Up to this many runs matching the filter are listed by their ids; past it, by the
# filter itself (_run_search's docstring).
MATCHES_LISTED = 1000


def _run_search(q: str, *, exact: bool = False) -> Q:
    """A run whose run_id or trace_id, or any of whose calls' tool_call_id, equals (or,
    unless `exact`, starts with) `q`; or one of whose calls' call_id or idempotency key is
    `q`. One UNION of index reads (the prefixes on B-trees in pattern order), not an OR
    tested on every run: flat however many runs and calls there are (bench/flat.py).

    A few matches (the usual: an id pasted whole) are handed to the page as their ids:
    given the UNION as a subquery, PostgreSQL walks the runs newest first testing each
    against it (it expects the page's 50 to come soon), which reads every run when only
    one matches. Past MATCHES_LISTED, that walk is what finds the page's 50 soonest."""
    how = "exact" if exact else "startswith"
    calls = Q(**{f"tool_call_id__{how}": q}) | Q(call_id=q)
    if run_search.KEY_RE.match(q):  # 64 hex characters: a key, only ever looked up whole
        calls |= Q(key=q)
    by_run_id = Run.objects.filter(**{f"run_id__{how}": q}).values_list("pk", flat=True)
    by_trace_id = Run.objects.filter(**{f"trace_id__{how}": q}).values_list("pk", flat=True)
    by_call = (
        ToolCall.objects.alias(key=run_search.KEY_EXPR)
        .filter(calls)
        .values_list("run_id", flat=True)
    )
    found = by_run_id.union(by_trace_id, by_call)
    listed = list(found[: MATCHES_LISTED + 1])
    return Q(pk__in=listed) if len(listed) <= MATCHES_LISTED else Q(pk__in=found)


@require_GET
@console_required
@custom_plans
def run_list(request: HtmxHttpRequest) -> HttpResponse:
    form = RunFilterForm(request.GET)
    filters = form.filters()
    runs = (
        # No Count of the calls over a join: it grouped the whole call table before the page
        # took its 50 runs, and the paginator's count joined it too (seconds at 10 million
        # calls, bench/flat.py). The count is that of the summary's calls, fetched anyway.
        Run.objects.select_related("agent")
        .prefetch_related(
            Prefetch(
                "calls",
                queryset=ToolCall.objects.agent_calls()
                .only(*SUMMARY_FIELDS)
                .order_by("created_at", "pk"),
                to_attr="summary_calls",
            ),
            # What an aborted run's summary says was undone (or not).
            Prefetch(
                "compensations",
                queryset=Compensation.objects.only("run_id", "tool", "status").order_by("-pk"),
                to_attr="summary_undo",
            ),
        )
        .order_by("-created_at", "-pk")
    )
    if "status" in filters:
        runs = runs.filter(status=filters["status"])
    if "agent" in filters:
        runs = runs.filter(agent_id=int(filters["agent"]))
    if "q" in filters:
        runs = runs.filter(_run_search(filters["q"]))
    page = Paginator(_RunRows(runs, timezone.now()), RUNS_PER_PAGE).get_page(
        request.GET.get("page")
    )
    ctx = page_context(request, "runs", form=form, filters=filters, page=page)
    return render(request, "console/runs.html", ctx)


class _RunRows:
    """The listed runs as rows, for the paginator: the query counts them and reads each
    page's slice, and only that slice is made into rows."""

    def __init__(self, runs: QuerySet[ListedRun], now: datetime) -> None:
        self.runs, self.now = runs, now

    def count(self) -> int:
        return self.runs.count()

    def __len__(self) -> int:
        return self.count()

    def __iter__(self) -> Iterator[RunRow]:
        return (_row(run, self.now) for run in self.runs)

    @overload
    def __getitem__(self, index: int) -> RunRow: ...
    @overload
    def __getitem__(self, index: slice) -> list[RunRow]: ...
    def __getitem__(self, index: int | slice) -> RunRow | list[RunRow]:
        if isinstance(index, slice):
            return [_row(run, self.now) for run in self.runs[index]]
        return _row(self.runs[index], self.now)


def _row(run: ListedRun, now: datetime) -> RunRow:
    return RunRow(
        pk=run.pk,
        run_id=run.run_id,
        agent=run.agent,
        status=run.status,
        created_at=run.created_at,
        calls_count=len(run.summary_calls),
        summary_head=_summary_head(run),
        idle=idle_text(run=run, calls=run.summary_calls, now=now),
    )


def _summary_head(run: ListedRun) -> str:
    """The list's one sentence: an aborted run's says it was aborted and what was undone."""
    if run.status in ABORT_STATES:
        undo = [(c.tool, c.status) for c in run.summary_undo]
        return abort_text(status=run.status, calls=run.summary_calls, undo=undo)
    return first_sentence(run_summary(run.summary_calls))


def _get_run_for_console(pk: int) -> Run:
    """Every console user may read every run; a missing one → 404."""
    return get_object_or_404(Run.objects.select_related("agent"), pk=pk)


@require_POST
@console_required
def run_abort(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """An operator abandons a run: the worker undoes what it did, newest first."""
    require_run_aborter(request.user)
    run = _get_run_for_console(pk)
    form = AbortRunForm(request.POST)
    if not form.is_valid():
        problems = "; ".join(str(errors[0]) for errors in form.errors.values())
        messages.error(request, f"Not aborted: {problems}.")
        return redirect("console:run-detail", pk=run.pk)
    try:
        run = services.run_abort_audited(
            run=run,
            reason=form.cleaned_data["reason"],
            by=request.user,
        )
    except services.RunEndingConflict as exc:
        messages.error(request, f"Not aborted: {exc}.")
    else:
        messages.success(
            request,
            f"Run {run.run_id} is {run.status}: "
            + (
                "the worker is undoing its calls, newest first."
                if run.status == "aborting"
                else "it had nothing to undo."
            ),
        )
    return redirect("console:run-detail", pk=run.pk)


@require_GET
@console_required
@custom_plans
def search(request: HtmxHttpRequest) -> HttpResponse:
    """`/console/search/?q=` (API.md): runs found by an exact id, by a business key or an
    e-mail (by HMAC, traces/search.py), or by a part of a run id (traces/console/search.py).
    One run found → its page, at the call the query names; otherwise the results page."""
    raw = request.GET.get("q", "")
    if not raw.strip():
        messages.info(request, "Type a run id, an order id or an e-mail to search.")
        return redirect("console:runs")
    try:
        q = run_search.checked(raw)
    except run_search.BadQuery as exc:
        ctx = page_context(request, "runs", query=raw[:80], problem=str(exc), results=None)
        return render(request, "console/search.html", ctx, status=400)
    results = run_search.run_search(q)
    one = results.single()
    if one is not None:
        if one.approval and can_review(request.user):
            return redirect("console:approval", approval_id=one.approval)
        if one.call is None:
            return redirect("console:run-detail", pk=one.run.pk)
        return redirect(call_page_url(one.call))
    ctx = page_context(request, "runs", query=q, results=results)
    return render(request, "console/search.html", ctx)
