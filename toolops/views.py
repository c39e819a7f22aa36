"""The console: runs, run detail, tools and their policies."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.contrib import messages
from django.contrib.admin.models import ADDITION, CHANGE, LogEntry
from django.core.paginator import Paginator
from django.db import IntegrityError, transaction
from django.db.models import Count, Prefetch, Q
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_http_methods
from django.views.decorators.vary import vary_on_headers

from toolops.forms import RunFilterForm, ToolPolicyForm
from toolops.models import Attempt, IdempotencyRecord, Run, ToolCall, ToolPolicy
from toolops.permissions import (
    can_edit_policies,
    console_required,
    require_policy_editor,
    role_label,
)
from toolops.summary import last_succeeded, run_summary
from toolops.tools import registry
from toolops.tools.catalog import CatalogError
from toolops.tools.spec import ToolSpec

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser
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
    calls = list(run.calls.order_by("created_at", "pk").prefetch_related("attempt_rows"))
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


def tool_policy_update(*, form: ToolPolicyForm, by: AbstractBaseUser) -> ToolPolicy:
    """Save an operator's overrides and audit them in Django admin's log, together."""
    adding = form.instance._state.adding
    with transaction.atomic():
        policy: ToolPolicy = form.save(commit=False)
        policy.updated_by = by  # type: ignore[assignment]
        policy.save()
        LogEntry.objects.log_actions(
            user_id=by.pk,
            queryset=[policy],  # type: ignore[arg-type]
            action_flag=ADDITION if adding else CHANGE,
            change_message=form.describe_changes(),
            single_object=True,
        )
    return policy


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
                tool_policy_update(form=form, by=request.user)  # type: ignore[arg-type]
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
