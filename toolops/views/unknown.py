"""Calls whose outcome is unknown (the downstream may or may not have acted), and the
form where a person settles one after checking the downstream."""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib import messages
from django.db.models import Count, Q
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods

from toolops import services
from toolops.executor import RECONCILE_MAX_ATTEMPTS
from toolops.forms import SettleUnknownForm
from toolops.models import ToolCall
from toolops.permissions import can_settle_unknown, console_required, require_unknown_settler
from toolops.tools.spec import ToolSpec
from toolops.tools.wording import error_sentence
from toolops.views.common import HtmxHttpRequest, catalog, page_context, pretty
from traces.services import redact

# Oldest first. More than this many at once is an incident, not a queue to page through.
UNKNOWN_LIMIT = 200


@dataclass
class UnknownRow:
    call: ToolCall
    # The tool that asks the downstream what became of the call; None: only a person can.
    query_tool: str | None
    in_catalog: bool
    error_text: str = ""  # its error as a sentence naming the service


def _query_tool(spec: ToolSpec | None) -> str | None:
    return spec.query.tool if spec is not None and spec.query is not None else None


@require_GET
@console_required
def unknown_list(request: HtmxHttpRequest) -> HttpResponse:
    specs = catalog()
    calls = (
        # The worker's undo calls are settled on their ticket (the support desk), not here.
        ToolCall.objects.agent_calls()
        .filter(status=ToolCall.Status.UNKNOWN)
        .select_related("run__agent")
        .defer("args", "result")  # possibly large, and not shown here
        # The reconcile looks recorded (the call's own and the worker's), as the run's
        # timeline lists them: the count beside them must agree.
        .annotate(looks=Count("attempt_rows", filter=Q(attempt_rows__purpose="reconcile")))
        .order_by("created_at", "pk")[:UNKNOWN_LIMIT]
    )
    rows = [
        UnknownRow(
            call,
            _query_tool(specs.get(call.tool)),
            in_catalog=call.tool in specs,
            error_text=error_sentence(
                call.error_message, tool=call.tool, spec=specs.get(call.tool)
            ),
        )
        for call in calls
    ]
    ctx = page_context(
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
    spec = catalog().get(call.tool)
    if request.method == "POST":
        form = SettleUnknownForm(request.POST, spec=spec)
        if form.is_valid():
            label = f"{call.tool} ({call.tool_call_id})"
            settled = services.call_settle_audited(
                call=call,
                by=request.user,
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
    attempts = list(call.attempt_rows.all())
    ctx = page_context(
        request,
        "unknown",
        call=call,
        form=form,
        query_tool=_query_tool(spec),
        in_catalog=spec is not None,
        # What a person searches the downstream's logs for.
        traced=[a for a in attempts if a.downstream_request_id],
        looks=sum(1 for a in attempts if a.purpose == "reconcile"),
        # Stored redacted; redacted again for rows older than that.
        args_json=pretty(redact(call.args, spec=spec)),
        error_text=error_sentence(call.error_message, tool=call.tool, spec=spec),
        max_looks=RECONCILE_MAX_ATTEMPTS,
    )
    return render(request, "console/unknown_settle.html", ctx)
