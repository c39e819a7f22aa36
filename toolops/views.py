"""The console: runs, run detail, tools and their policies, unknown outcomes, tool health
and circuit breakers."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.contrib import messages
from django.core.paginator import Paginator
from django.db import IntegrityError, connection
from django.db.models import Aggregate, Count, FloatField, Prefetch, Q
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django.views.decorators.vary import vary_on_headers

from toolops import services
from toolops.executor.settle import RECONCILE_MAX_ATTEMPTS
from toolops.forms import BreakerForceOpenForm, RunFilterForm, SettleUnknownForm, ToolPolicyForm
from toolops.models import Attempt, CircuitBreaker, IdempotencyRecord, Run, ToolCall, ToolPolicy
from toolops.permissions import (
    can_control_breakers,
    can_edit_policies,
    can_settle_unknown,
    console_required,
    require_breaker_operator,
    require_policy_editor,
    require_unknown_settler,
    role_label,
)
from toolops.summary import last_succeeded, run_summary
from toolops.tools import registry
from toolops.tools.catalog import CatalogError
from toolops.tools.spec import ToolSpec

if TYPE_CHECKING:
    from django.http import HttpRequest
    from django_htmx.middleware import HtmxDetails

    class HtmxHttpRequest(HttpRequest):
        htmx: HtmxDetails

else:
    from django.http import HttpRequest as HtmxHttpRequest


RUNS_PER_PAGE = 50
# While a run can still change, its page polls for a fresh body.
LIVE_STATUSES = (Run.Status.RUNNING, Run.Status.ABORTING)
# What the summary needs from each call, and no more (args and results can be large).
SUMMARY_FIELDS = ("run_id", "tool", "tool_call_id", "status", "error_reason", "created_at")


def _page_context(request: HttpRequest, nav: str, **ctx: Any) -> dict[str, Any]:
    """What base.html needs besides the page's own context."""
    return {
        "nav": nav,
        "role": role_label(request.user),
        "can_edit_policies": can_edit_policies(request.user),
        # The nav badge: cases only a person can close. One COUNT on (status, created_at).
        "unknown_count": ToolCall.objects.filter(status=ToolCall.Status.UNKNOWN).count(),
        **ctx,
    }


def first_sentence(text: str) -> str:
    # Ids may hold dots ("tc-1.2") but never spaces, so a sentence ends at ". ".
    head, sep, _ = text.partition(". ")
    return f"{head}." if sep else text


# -- runs ----------------------------------------------------------------------------


def _run_search(q: str) -> Q:
    """A run whose run_id or trace_id, or any of whose calls' tool_call_id (or call_id),
    equals or starts with `q`."""
    calls = ToolCall.objects.filter(
        Q(tool_call_id__startswith=q) | Q(call_id__startswith=q)
    ).values("run_id")
    return Q(run_id__startswith=q) | Q(trace_id__startswith=q) | Q(pk__in=calls)


@require_GET
@console_required
def run_list(request: HtmxHttpRequest) -> HttpResponse:
    form = RunFilterForm(request.GET)
    filters = form.filters()
    runs = (
        Run.objects.select_related("agent")
        .annotate(calls_count=Count("calls"))
        .prefetch_related(
            Prefetch(
                "calls",
                queryset=ToolCall.objects.only(*SUMMARY_FIELDS).order_by("created_at", "pk"),
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
    ctx = _page_context(request, "runs", form=form, filters=filters, page=page)
    return render(request, "console/runs.html", ctx)


def _get_run_for_console(pk: int) -> Run:
    """Every console user may read every run; a missing one → 404."""
    return get_object_or_404(Run.objects.select_related("agent"), pk=pk)


def _pretty(value: Any) -> str:
    if value is None:
        return ""
    return json.dumps(value, indent=2, ensure_ascii=False)


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
        run.calls.order_by("created_at", "pk")
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
            args_json=_pretty(c.args),
            result_json=_pretty(c.result),
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
    if request.htmx and not request.htmx.history_restore_request:
        return render(request, "console/run_detail.html#run-body", ctx)
    return render(request, "console/run_detail.html", _page_context(request, "runs", **ctx))


# -- tools and policies -----------------------------------------------------------------

POLICY_COLUMNS = (
    ("timeout_s", "timeout"),
    ("max_attempts", "attempts"),
    ("backoff_base_s", "backoff base"),
    ("backoff_cap_s", "backoff cap"),
    ("requires_approval", "approval"),
    ("approval_ttl_s", "approval TTL"),
    ("session_dedupe_window_s", "dedupe window"),
)


@dataclass
class PolicyCell:
    name: str
    value: Any
    catalog: Any
    overridden: bool


@dataclass
class ToolRow:
    spec: ToolSpec
    policy: ToolPolicy | None
    cells: list[PolicyCell]


def _overrides(policy: ToolPolicy | None) -> dict[str, Any]:
    if policy is None:
        return {}
    values = {name: getattr(policy, name) for name in registry.POLICY_FIELDS}
    return {k: v for k, v in values.items() if v is not None}


def _tool_rows() -> list[ToolRow]:
    # The policy rows are read here, not through the registry's per-process cache, so
    # the page shows a change the moment it is saved.
    policies = {p.tool: p for p in ToolPolicy.objects.select_related("updated_by")}
    catalog = registry.load()
    # Public tools first (what agents see), then the internal ones (compensations, queries).
    specs = sorted(catalog.values(), key=lambda s: (s.internal, s.name))
    rows = []
    for spec in specs:
        policy = policies.get(spec.name)
        overrides = _overrides(policy)
        effective = spec.with_policy(overrides)
        cells = [
            PolicyCell(name, getattr(effective, name), getattr(spec, name), name in overrides)
            for name, _ in POLICY_COLUMNS
        ]
        rows.append(ToolRow(spec=effective, policy=policy, cells=cells))
    return rows


@require_GET
@console_required
def tool_list(request: HtmxHttpRequest) -> HttpResponse:
    try:
        rows, catalog_error = _tool_rows(), ""
    except CatalogError as exc:
        rows, catalog_error = [], str(exc)
    ctx = _page_context(
        request,
        "tools",
        rows=rows,
        columns=[label for _, label in POLICY_COLUMNS],
        catalog_error=catalog_error,
        cache_s=settings.TOOLOPS_POLICY_CACHE_S,
    )
    return render(request, "console/tools.html", ctx)


def _get_catalog_tool(name: str) -> ToolSpec:
    """The tool as the catalog declares it (no policy applied); unknown → 404."""
    try:
        spec = registry.load().get(name)
    except CatalogError:
        spec = None
    if spec is None:
        raise Http404("no such tool")
    return spec


@require_http_methods(["GET", "POST"])
@console_required
def tool_policy_edit(request: HtmxHttpRequest, name: str) -> HttpResponse:
    require_policy_editor(request.user)
    spec = _get_catalog_tool(name)
    policy = ToolPolicy.objects.filter(tool=spec.name).first() or ToolPolicy(tool=spec.name)
    if request.method == "POST":
        form = ToolPolicyForm(request.POST, instance=policy, spec=spec)
        if form.is_valid():
            if not form.has_changed():
                messages.info(request, f"Nothing changed in the policy for {spec.name}.")
                return redirect("console:tools")
            try:
                services.tool_policy_save(
                    policy=form.save(commit=False),
                    by=request.user,  # type: ignore[arg-type]
                    changes=form.describe_changes(),
                )
            except IntegrityError:
                # Another operator created this tool's policy between our read and write.
                form.add_error(None, "Someone else just changed this policy; please retry.")
            else:
                messages.success(
                    request,
                    f"Policy for {spec.name} saved. Changes apply within a few seconds "
                    f"(every process re-reads policies every "
                    f"{settings.TOOLOPS_POLICY_CACHE_S:g} s).",
                )
                return redirect("console:tools")
    else:
        form = ToolPolicyForm(instance=policy, spec=spec)
    ctx = _page_context(request, "tools", spec=spec, policy=policy, form=form)
    return render(request, "console/tool_policy.html", ctx)


def _catalog() -> dict[str, ToolSpec]:
    """The catalog's tools, or none when it cannot be loaded (the tools page says why)."""
    try:
        return registry.load()
    except CatalogError:
        return {}


# -- unknown outcomes ---------------------------------------------------------------------

# Oldest first. More than this many at once is an incident, not a queue to page through.
UNKNOWN_LIMIT = 200


@dataclass
class UnknownRow:
    call: ToolCall
    # The tool that asks the downstream what became of the call; None: only a person can.
    query_tool: str | None
    in_catalog: bool


def _query_tool(spec: ToolSpec | None) -> str | None:
    return spec.query.tool if spec is not None and spec.query is not None else None


@require_GET
@console_required
def unknown_list(request: HtmxHttpRequest) -> HttpResponse:
    catalog = _catalog()
    calls = (
        ToolCall.objects.filter(status=ToolCall.Status.UNKNOWN)
        .select_related("run__agent")
        .defer("args", "result")  # possibly large, and not shown here
        .order_by("created_at", "pk")[:UNKNOWN_LIMIT]
    )
    rows = [
        UnknownRow(call, _query_tool(catalog.get(call.tool)), in_catalog=call.tool in catalog)
        for call in calls
    ]
    ctx = _page_context(
        request,
        "unknown",
        rows=rows,
        limit=UNKNOWN_LIMIT,
        now=timezone.now(),
        max_looks=RECONCILE_MAX_ATTEMPTS,
        can_settle=can_settle_unknown(request.user),
    )
    return render(request, "console/unknown.html", ctx)


def _get_call_for_console(pk: int) -> ToolCall:
    """Every console user may read every call; a missing one → 404."""
    return get_object_or_404(ToolCall.objects.select_related("run__agent", "settled_by"), pk=pk)


@require_http_methods(["GET", "POST"])
@console_required
def unknown_settle(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    require_unknown_settler(request.user)
    call = _get_call_for_console(pk)
    spec = _catalog().get(call.tool)
    if request.method == "POST":
        form = SettleUnknownForm(request.POST, spec=spec)
        if form.is_valid():
            label = f"{call.tool} ({call.tool_call_id})"
            settled = services.call_settle_audited(
                call=call,
                by=request.user,  # type: ignore[arg-type]
                succeeded=form.succeeded,
                note=form.cleaned_data["note"],
                result=form.cleaned_data["result"],
                audit_text=form.describe(),
            )
            if settled:
                verdict = "did take effect" if form.succeeded else "did not take effect"
                messages.success(request, f"Settled {label}: {verdict}. The agent is told so.")
            else:
                messages.warning(
                    request,
                    f"{label} was already settled (by someone else or by the worker); "
                    "nothing was changed.",
                )
            return redirect("console:unknown")
    else:
        form = SettleUnknownForm(spec=spec)
    ctx = _page_context(
        request,
        "unknown",
        call=call,
        form=form,
        query_tool=_query_tool(spec),
        in_catalog=spec is not None,
        # What a person searches the downstream's logs for.
        traced=[a for a in call.attempt_rows.all() if a.downstream_request_id],
        args_json=_pretty(call.args),
        max_looks=RECONCILE_MAX_ATTEMPTS,
    )
    return render(request, "console/unknown_settle.html", ctx)


# -- tool health and circuit breakers ------------------------------------------------------


class Median(Aggregate):
    """PostgreSQL's ordered-set aggregate for the 50th percentile."""

    function = "PERCENTILE_CONT"
    name = "Median"
    template = "%(function)s(0.5) WITHIN GROUP (ORDER BY %(expressions)s)"
    output_field = FloatField()


@dataclass
class HealthRow:
    spec: ToolSpec
    breaker: CircuitBreaker | None
    # Attempts in the breaker's window that say something about the tool (not neutral).
    counted: int
    failed: int
    p50_ms: float | None
    form: BreakerForceOpenForm
    now: datetime

    @property
    def state(self) -> str:
        return self.breaker.state if self.breaker else CircuitBreaker.State.CLOSED

    @property
    def rate(self) -> float | None:
        return self.failed / self.counted if self.counted else None

    @property
    def rate_over_threshold(self) -> bool:
        """What the breaker would trip on (a rate at or over the threshold, enough calls)."""
        config = self.spec.breaker
        rate = self.rate
        return rate is not None and self.counted >= config.min_calls and rate >= config.failure_rate

    @property
    def open_until_passed(self) -> bool:
        until = self.breaker.open_until if self.breaker else None
        return until is not None and until <= self.now


def _window_counts(specs: list[ToolSpec], now: datetime) -> dict[str, dict[str, Any]]:
    """Each tool's attempts over its own breaker window, in ONE grouped query: the same
    counts the breaker trips on (breaker._window_rate), for every tool at once."""
    windows: dict[float, list[str]] = {}
    for spec in specs:
        windows.setdefault(spec.breaker.window_s, []).append(spec.name)
    if not windows:
        return {}
    # One (tool IN …, started_at ≥ …) term per distinct window; (tool, started_at) is indexed.
    where = Q()
    for window_s, names in windows.items():
        where |= Q(tool__in=names, started_at__gte=now - timedelta(seconds=window_s))
    aggregates: dict[str, Any] = {
        "counted": Count("pk", filter=~Q(health=Attempt.Health.NEUTRAL)),
        "failed": Count("pk", filter=Q(health=Attempt.Health.FAILURE)),
    }
    if connection.vendor == "postgresql":  # SQLite has no percentile; the page shows "—"
        aggregates["p50_ms"] = Median("duration_ms")
    rows = Attempt.objects.filter(where).order_by().values("tool").annotate(**aggregates)
    return {row["tool"]: row for row in rows}


def _health_rows(bound: BreakerForceOpenForm | None = None) -> list[HealthRow]:
    """Every tool in the catalog (internal ones too), public first. `bound`: a force-open
    form that failed validation, shown again on its own tool's row."""
    specs = sorted(registry.load().values(), key=lambda s: (s.internal, s.name))
    now = timezone.now()
    breakers = {b.tool: b for b in CircuitBreaker.objects.all()}
    counts = _window_counts(specs, now)
    rows = []
    for spec in specs:
        row = counts.get(spec.name, {})
        form = bound if bound is not None and bound.prefix == spec.name else None
        rows.append(
            HealthRow(
                spec=spec,
                breaker=breakers.get(spec.name),
                counted=row.get("counted", 0),
                failed=row.get("failed", 0),
                p50_ms=row.get("p50_ms"),
                form=form or BreakerForceOpenForm(prefix=spec.name),
                now=now,
            )
        )
    return rows


def _health_page(
    request: HtmxHttpRequest, bound: BreakerForceOpenForm | None = None
) -> HttpResponse:
    try:
        rows, catalog_error = _health_rows(bound), ""
    except CatalogError as exc:
        rows, catalog_error = [], str(exc)
    ctx = _page_context(
        request,
        "health",
        rows=rows,
        catalog_error=catalog_error,
        can_control=can_control_breakers(request.user),
        bound=bound,
    )
    return render(request, "console/health.html", ctx)


@require_GET
@console_required
def tool_health(request: HtmxHttpRequest) -> HttpResponse:
    return _health_page(request)


@require_POST
@console_required
def breaker_force_open(request: HtmxHttpRequest, name: str) -> HttpResponse:
    require_breaker_operator(request.user)
    spec = _get_catalog_tool(name)
    form = BreakerForceOpenForm(request.POST, prefix=spec.name)
    if not form.is_valid():
        return _health_page(request, bound=form)
    minutes = form.cleaned_data["minutes"]
    row = services.breaker_force_open_audited(
        tool=spec.name,
        minutes=minutes,
        reason=form.cleaned_data["reason"],
        by=request.user,  # type: ignore[arg-type]
    )
    until = f"{timezone.localtime(row.open_until):%Y-%m-%d %H:%M}" if row.open_until else "?"
    messages.success(
        request,
        f"Breaker for {spec.name} held open for {minutes} min (until {until} UTC): every call "
        "to it ends at once as temporarily unavailable.",
    )
    return redirect("console:health")


@require_POST
@console_required
def breaker_reset(request: HtmxHttpRequest, name: str) -> HttpResponse:
    require_breaker_operator(request.user)
    spec = _get_catalog_tool(name)
    if services.breaker_reset_audited(tool=spec.name, by=request.user) is None:  # type: ignore[arg-type]
        messages.info(request, f"The breaker for {spec.name} never tripped: nothing to reset.")
    else:
        messages.success(request, f"Breaker for {spec.name} reset: closed, failure count cleared.")
    return redirect("console:health")
