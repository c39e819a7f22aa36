"""The runs list and a run's page: its calls, attempts, idempotency records, budget and
where it stopped."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.core.paginator import Paginator
from django.db.models import Count, Prefetch, Q
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST
from django.views.decorators.vary import vary_on_headers

from compensations.models import Compensation
from toolops import services
from toolops.forms import AbortRunForm, RunFilterForm
from toolops.models import Attempt, IdempotencyRecord, Run, ToolCall
from toolops.permissions import (
    can_abort_runs,
    can_settle_unknown,
    can_work_tickets,
    console_required,
    require_run_aborter,
)
from toolops.summary import last_succeeded, run_summary
from toolops.views.common import (
    HtmxHttpRequest,
    first_sentence,
    is_refresh,
    page_context,
    pretty,
)

RUNS_PER_PAGE = 50
# While a run can still change, its page polls for a fresh body.
LIVE_STATUSES = (Run.Status.RUNNING, Run.Status.ABORTING)
ABORTABLE = (Run.Status.RUNNING, Run.Status.BUDGET_EXHAUSTED)
# What the summary needs from each call, and no more (args and results can be large).
SUMMARY_FIELDS = ("run_id", "tool", "tool_call_id", "status", "error_reason", "created_at")


def _run_search(q: str, *, exact: bool = False) -> Q:
    """A run whose run_id or trace_id, or any of whose calls' tool_call_id, call_id or
    idempotency key, equals (or, unless `exact`, starts with) `q`."""
    how = "exact" if exact else "startswith"
    calls = ToolCall.objects.filter(
        Q(**{f"tool_call_id__{how}": q})
        | Q(**{f"call_id__{how}": q})
        | Q(idempotency_key=q)  # 64 hex characters: only ever looked up whole
    ).values("run_id")
    return Q(**{f"run_id__{how}": q}) | Q(**{f"trace_id__{how}": q}) | Q(pk__in=calls)


@require_GET
@console_required
def run_list(request: HtmxHttpRequest) -> HttpResponse:
    form = RunFilterForm(request.GET)
    filters = form.filters()
    runs = (
        Run.objects.select_related("agent")
        .annotate(calls_count=Count("calls", filter=Q(calls__role=ToolCall.Role.CALL)))
        .prefetch_related(
            Prefetch(
                "calls",
                queryset=ToolCall.objects.agent_calls()
                .only(*SUMMARY_FIELDS)
                .order_by("created_at", "pk"),
                to_attr="summary_calls",
            )
        )
        .order_by("-created_at", "-pk")
    )
    if "status" in filters:
        runs = runs.filter(status=filters["status"])
    if "agent" in filters:
        runs = runs.filter(agent_id=int(filters["agent"]))
    if "q" in filters:
        runs = runs.filter(_run_search(filters["q"]))
    page = Paginator(runs, RUNS_PER_PAGE).get_page(request.GET.get("page"))
    page.object_list = list(page.object_list)
    for run in page.object_list:
        run.summary_head = first_sentence(run_summary(run.summary_calls))
    ctx = page_context(request, "runs", form=form, filters=filters, page=page)
    return render(request, "console/runs.html", ctx)


def _get_run_for_console(pk: int) -> Run:
    """Every console user may read every run; a missing one → 404."""
    return get_object_or_404(Run.objects.select_related("agent"), pk=pk)


@dataclass
class CallRow:
    call: ToolCall
    attempts: list[Attempt]
    record: IdempotencyRecord | None
    args_json: str
    result_json: str
    is_last_succeeded: bool

    @property
    def last_attempt(self) -> Attempt | None:
        return self.attempts[-1] if self.attempts else None


@dataclass
class BudgetLine:
    label: str
    used: float | int
    limit: float | int | None
    exhausted: bool = field(init=False)

    def __post_init__(self) -> None:
        self.exhausted = self.limit is not None and self.used >= self.limit


def _run_context(run: Run) -> dict[str, Any]:
    calls = list(
        run.calls.agent_calls()
        .order_by("created_at", "pk")
        .select_related("settled_by")
        .prefetch_related("attempt_rows")
    )
    # One query for every call's record. `key` is unique and indexed (call_ref is not);
    # a record belongs to the call its call_ref names.
    keys = [c.idempotency_key for c in calls if c.idempotency_key]
    records = {r.call_ref: r for r in IdempotencyRecord.objects.filter(key__in=keys)}
    stopped_after = last_succeeded(calls)
    rows = [
        CallRow(
            call=c,
            attempts=list(c.attempt_rows.all()),
            record=records.get(c.call_id),
            args_json=pretty(c.args),
            result_json=pretty(c.result),
            is_last_succeeded=c.tool_call_id == stopped_after,
        )
        for c in calls
    ]
    return {
        "run": run,
        "rows": rows,
        "summary": run_summary(calls),
        "last_succeeded": stopped_after,
        "stop": _stopping_call(rows),
        "budget": [
            BudgetLine("attempts", run.attempts_used, run.max_attempts),
            BudgetLine("seconds", round(run.seconds_used(), 1), run.max_seconds),
            BudgetLine("tokens", run.tokens_used, run.max_tokens),
        ],
        "live": run.status in LIVE_STATUSES,
        # The saga: what would undo each call, and how that went (the undo calls' own
        # attempts are on each ticket's page).
        "compensations": list(
            Compensation.objects.filter(run=run)
            .select_related("call", "undo_call", "ticket")
            .order_by("-pk")
        ),
    }


def _stopping_call(rows: list[CallRow]) -> CallRow | None:
    """The first call after the last succeeded one that did not succeed: where an
    operator looks next (its attempts, its idempotency record, its downstream id)."""
    start = 0
    for index, row in enumerate(rows):
        if row.is_last_succeeded:
            start = index + 1
    return next((r for r in rows[start:] if r.call.status != ToolCall.Status.SUCCEEDED), None)


@require_GET
@vary_on_headers("HX-Request")
@console_required
def run_detail(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    run = _get_run_for_console(pk)
    ctx = _run_context(run)
    ctx["can_settle"] = can_settle_unknown(request.user)
    ctx["can_abort"] = can_abort_runs(request.user) and run.status in ABORTABLE
    ctx["can_work_tickets"] = can_work_tickets(request.user)
    if is_refresh(request):
        return render(request, "console/run_detail.html#run-body", ctx)
    return render(request, "console/run_detail.html", page_context(request, "runs", **ctx))


@require_POST
@console_required
def run_abort(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """An operator abandons a run: the worker undoes what it did, newest first."""
    require_run_aborter(request.user)
    run = _get_run_for_console(pk)
    form = AbortRunForm(request.POST)
    if not form.is_valid():
        messages.error(request, f"Not aborted: {form.errors['reason'][0]}")
        return redirect("console:run-detail", pk=run.pk)
    try:
        run = services.run_abort_audited(
            run=run,
            reason=form.cleaned_data["reason"],
            by=request.user,  # type: ignore[arg-type]
        )
    except services.RunEndingConflict as exc:
        messages.error(request, f"Not aborted: {exc}.")
    else:
        messages.success(
            request,
            f"Run {run.run_id} is {run.status}: "
            + ("the worker is undoing its calls, newest first." if run.status == "aborting"
               else "it had nothing to undo."),
        )  # fmt: skip
    return redirect("console:run-detail", pk=run.pk)


@require_GET
@console_required
def search(request: HtmxHttpRequest) -> HttpResponse:
    """`/console/search/?q=ID` (API.md): the run an id names, by its run_id, trace_id, or
    one of its calls' tool_call_id, call_id or idempotency key. One run → its page;
    several (ids are unique per agent, not across agents) or none → the filtered list."""
    q = request.GET.get("q", "").strip()[:128]
    if not q:
        return redirect("console:runs")
    found = list(Run.objects.filter(_run_search(q, exact=True)).values_list("pk", flat=True)[:2])
    if len(found) == 1:
        return redirect("console:run-detail", pk=found[0])
    if not found:
        messages.info(request, f"No run has the id {q!r}; runs whose ids start with it are listed.")
    return redirect(f"{reverse('console:runs')}?{urlencode({'q': q})}")
