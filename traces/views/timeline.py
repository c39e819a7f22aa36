"""The run page (`/console/runs/<pk>/`): the run in plain words (traces/console/story.py),
then its waterfall (traces/console/timeline.py), live while the run can change; and
`/console/calls/<call_id>/`, a deep link to one call."""

from __future__ import annotations

from typing import Any

from django.http import HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET
from django.views.decorators.vary import vary_on_headers

from toolops.models import Run, ToolCall
from toolops.permissions import (
    can_abort_runs,
    can_review,
    can_settle_unknown,
    can_work_tickets,
    console_required,
)
from toolops.tools.spec import ToolSpec
from toolops.views.common import (
    HtmxHttpRequest,
    catalog,
    is_refresh,
    live_context,
    page_context,
)
from traces.console.compensated import compensations_build
from traces.console.story import run_story_build
from traces.console.timeline import Timeline, call_page_url, timeline_build
from traces.console.words import run_status_words
from traces.live import run_push_path

ABORTABLE = (Run.Status.RUNNING, Run.Status.BUDGET_EXHAUSTED)


@require_GET
@vary_on_headers("HX-Request")
@console_required
def run_timeline(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    run = get_object_or_404(Run.objects.select_related("agent"), pk=pk)
    tools = catalog()
    timeline = timeline_build(run=run, page=_page(request), tools=tools)
    ctx = live_context(push_path=run_push_path(run.pk), **_context(request, timeline, tools))
    # A run that can no longer change needs no socket, and its page stops polling.
    ctx["pushed"] = ctx["pushed"] and timeline.live
    if is_refresh(request):
        return render(request, "traces/run.html#run-body", ctx)
    return render(request, "traces/run.html", page_context(request, "runs", **ctx))


@require_GET
@console_required
def call_detail(request: HtmxHttpRequest, call_id: str) -> HttpResponseRedirect:
    """A call's deep link: its run's page, at the call, on the page that shows it."""
    call = get_object_or_404(
        ToolCall.objects.only("run_id", "call_id", "created_at"), call_id=call_id
    )
    return redirect(call_page_url(call))


def _page(request: HtmxHttpRequest) -> int | None:
    page = request.GET.get("page", "")[:9]
    # isdigit() alone lets "²" through, which int() refuses.
    return int(page) if page.isascii() and page.isdigit() else None


def _context(
    request: HtmxHttpRequest, timeline: Timeline, tools: dict[str, ToolSpec]
) -> dict[str, Any]:
    """All that `run.html#run-body` needs: a refresh renders it without page_context."""
    run = timeline.run
    compensations = compensations_build(timeline=timeline)
    return {
        "run": run,
        "run_status": run_status_words(run.status),
        "story": run_story_build(timeline=timeline, compensations=compensations, tools=tools),
        "timeline": timeline,
        "rows": timeline.rows,
        "stop": timeline.stop,
        "last_succeeded": timeline.last_succeeded.tool_call_id if timeline.last_succeeded else None,
        "compensations": compensations,
        "live": timeline.live,
        "refresh_url": request.get_full_path(),
        "can_settle": can_settle_unknown(request.user),
        "can_review": can_review(request.user),
        "can_work_tickets": can_work_tickets(request.user),
        "can_abort": can_abort_runs(request.user) and run.status in ABORTABLE,
        "can_view_full_args": request.user.has_perm("traces.view_full_args"),
    }
