"""The reviewer queue and an approval's page (API.md: an approval's `url` shows the call's
tool_call_id and run_id and has buttons named "Approve" and "Reject"). Both refresh
themselves like the support desk — pushed over Channels when REDIS_URL is set, polled by
htmx otherwise. A decision is a plain POST form that redirects (Post/Redirect/Get) to
the next approval waiting, so a reviewer can work down the queue."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST
from django.views.decorators.vary import vary_on_headers

from toolops.approvals import selectors, services
from toolops.approvals.consumers import PUSH_PATH
from toolops.approvals.forms import ApprovalFilterForm, DecisionForm
from toolops.approvals.models import Approval
from toolops.approvals.wording import (
    CALL_STATUS_WORDS,
    consequence,
    describe,
    reason_label,
    reason_text,
    undo_tool,
)
from toolops.models import Agent, ToolCall
from toolops.notify import links
from toolops.permissions import console_required, require_reviewer
from toolops.templatetags.when import waited
from toolops.tools import facts
from toolops.tools.spec import ToolSpec
from toolops.tools.wording import error_sentence
from toolops.views.common import (
    HtmxHttpRequest,
    catalog,
    is_refresh,
    live_context,
    page_context,
    pretty,
)
from traces import services as traces


def _get_approval(request: HtmxHttpRequest, approval_id: str) -> Approval:
    """Reviewers (and superusers) only; another console user → 403, unknown id → 404."""
    require_reviewer(request.user)
    return get_object_or_404(selectors.approvals_for_page(), approval_id=approval_id)


def _live(**ctx: Any) -> dict[str, Any]:
    return live_context(push_path=PUSH_PATH, **ctx)


def _schema(specs: dict[str, ToolSpec], tool: str) -> dict[str, Any] | None:
    spec = specs.get(tool)
    return spec.params_schema if spec is not None else None


def _action(approval: Approval, call: ToolCall | None, specs: dict[str, ToolSpec]) -> str:
    """The held call in plain words: its catalog title (tools/facts.py) when the tool has
    a summary, else the approvals' own wording; just the tool's name if the call is gone."""
    if call is None:
        return approval.tool
    spec = specs.get(call.tool)
    if spec is not None and spec.summary:
        return facts.title(spec, call.args, call.result, tool=call.tool)
    return describe(call, _schema(specs, call.tool))


# -- the queue ---------------------------------------------------------------------------


@dataclass
class QueueRow:
    approval: Approval
    call: ToolCall | None
    action: str
    reason: str  # the reason's badge, aware of the catalog's undo ("undone only by refund")


def _row(approval: Approval, call: ToolCall | None, specs: dict[str, ToolSpec]) -> QueueRow:
    label = reason_label(approval.reason, approval.get_reason_display(), specs.get(approval.tool))
    return QueueRow(approval, call, _action(approval, call, specs), label)


@require_GET
@vary_on_headers("HX-Request")
@console_required
def approval_queue(request: HtmxHttpRequest) -> HttpResponse:
    require_reviewer(request.user)
    tab = request.GET.get("tab", "")
    if tab in selectors.HISTORY_TABS:
        return _history(request, tab)
    form = ApprovalFilterForm(request.GET)
    filters = form.filters()
    specs = catalog()
    approvals = selectors.approval_queue(filters=filters, user=request.user)
    rows = []
    for approval in approvals[: selectors.QUEUE_LIMIT]:
        call = selectors.held_call(approval)
        reason = reason_label(
            approval.reason, approval.get_reason_display(), specs.get(approval.tool)
        )
        rows.append(QueueRow(approval, call, _action(approval, call, specs), reason))
    ctx = _live(
        form=form, filters=filters, rows=rows, counts=selectors.approval_counts(),
        limit=selectors.QUEUE_LIMIT, now=timezone.now(),
    )  # fmt: skip
    if is_refresh(request):
        return render(request, "approvals/queue.html#approval-table", ctx)
    ctx["tab"], ctx["tabs"] = "waiting", selectors.approval_tab_counts()
    ctx["tools"] = sorted(name for name, spec in specs.items() if not spec.internal)
    ctx["agents"] = list(Agent.objects.order_by("name").values_list("pk", "name"))
    return render(request, "approvals/queue.html", page_context(request, "approvals", **ctx))


def _history(request: HtmxHttpRequest, tab: str) -> HttpResponse:
    """`?tab=decided|expired`: the approvals that ended, newest first, page by page (no
    live refresh: the past does not change)."""
    specs = catalog()
    approvals = selectors.approval_history(tab=tab)
    page = Paginator(approvals, selectors.HISTORY_PER_PAGE).get_page(request.GET.get("page"))
    rows = []
    for approval in page.object_list:
        call = selectors.held_call(approval)
        rows.append(_row(approval, call, specs))
    ctx = page_context(
        request, "approvals", tab=tab, tabs=selectors.approval_tab_counts(), page=page,
        history=rows,
    )  # fmt: skip
    return render(request, "approvals/queue.html", ctx)


# -- an approval's page ------------------------------------------------------------------------


@dataclass
class Step:
    """A call shown on an approval's page: the held one, an earlier one or a duplicate."""

    call: ToolCall
    action: str
    args_json: str
    result_json: str
    error: str = ""  # the call's error as a sentence naming the service
    status: str = ""  # the call's status as a label
    full: bool = False  # args_json holds the full, unredacted args
    # Why it does not: the full args could not be decrypted (approving it sends nothing).
    problem: str = ""


def _step(call: ToolCall, specs: dict[str, ToolSpec]) -> Step:
    spec = specs.get(call.tool)
    # Shown to people redacted (traces/sensitive.py): by name, pattern, catalog or schema.
    return Step(
        call=call,
        action=(
            facts.title(spec, call.args, call.result, tool=call.tool)
            if spec is not None and spec.summary
            else describe(call, spec.params_schema if spec else None)
        ),
        error=error_sentence(call.error_message, tool=call.tool, spec=spec),
        status=CALL_STATUS_WORDS.get(call.status, call.status),
        args_json=pretty(traces.redact(call.args, spec=spec)),
        result_json=pretty(traces.redact(call.result, spec=spec, result=True)),
    )


def _status_context(request: HtmxHttpRequest, approval: Approval) -> dict[str, Any]:
    """What the page's live region shows: the decision so far."""
    call = selectors.held_call(approval)
    specs = catalog()
    spec = specs.get(approval.tool)
    now = timezone.now()
    return {
        "approval": approval,
        "call": call,
        "action": _action(approval, call, specs),
        "facts": facts.facts(spec, call.args, call.result) if call else [],
        "consequence": consequence(approval.tool, spec, status=approval.status),
        "undo_tool": undo_tool(spec),
        "reason_text": reason_text(approval.reason, spec),
        "reason_label": reason_label(approval.reason, approval.get_reason_display(), spec),
        "waited": waited(approval.created_at, now),
        "time_left": _left(now, approval),
        "votes": selectors.votes_summary(approval=approval, user=request.user),
        "now": now,
    }


def _left(now: datetime, approval: Approval) -> str:
    """The time left to decide, "" once it is up."""
    if approval.expires_at <= now:
        return ""
    left = waited(now, approval.expires_at)
    return "under a minute" if left == "just now" else left


@require_GET
@never_cache  # it may show a held call's full args
@vary_on_headers("HX-Request")
@console_required
def approval_detail(request: HtmxHttpRequest, approval_id: str) -> HttpResponse:
    approval = _get_approval(request, approval_id)
    ctx = _live(**_status_context(request, approval))
    if is_refresh(request):
        return render(request, "approvals/approval.html#approval-live", ctx)
    followed = links.opened(request.GET.get(links.PARAM, ""), request.user, page=request.path_info)
    if followed:
        messages.info(request, followed)
    specs = catalog()
    call = ctx["call"]
    duplicate = approval.duplicate_of
    held = _step(call, specs) if call else None
    if held is not None and approval.status == Approval.Status.PENDING:
        # Judging what the call would send is the reviewer's job: the full args, each look
        # audited. Decided, the call is shown redacted like any other.
        seen = traces.full_args_read(call=call, user=request.user, purpose="approval")
        held.args_json = pretty(seen.args)
        held.full = not seen.args_problem
        held.problem = seen.args_problem
    ctx.update(
        held=held,
        earlier=[_step(c, specs) for c in selectors.earlier_calls(call=call, run=approval.run)]
        if call
        else [],
        earlier_limit=selectors.EARLIER_LIMIT,
        duplicate=_step(duplicate, specs) if duplicate else None,
        # The args hash as this page shows it: the decision names it, and the service
        # refuses it if the approval holds other args by then.
        form=DecisionForm(initial={"args_hash": approval.args_hash}),
        decidable=approval.status == Approval.Status.PENDING and call is not None,
        own_agent=approval.run.agent.owner_id == request.user.pk,
    )
    return render(request, "approvals/approval.html", page_context(request, "approvals", **ctx))


# -- deciding ---------------------------------------------------------------------------------


def _said(approval: Approval, decided: Approval, *, approve: bool) -> str:
    """The message after a decision; `approval` as the page read it, `decided` as the
    service left it."""
    call = selectors.held_call(approval)
    what = f"“{_action(approval, call, catalog())}”"
    if call is not None:
        what = f"{what} ({call.tool_call_id} in run {approval.run.run_id})"
    if not approve:
        return f"Rejected {what}: the agent is told why."
    if decided.status == Approval.Status.APPROVED:
        return f"Approved {what}: the worker runs it now."
    approved = decided.votes.filter(decision="approve").count()
    return (
        f"Approved {what}: {approved} of {decided.approvals_required} approvals; it waits "
        "for another reviewer."
    )


@require_POST
@console_required
def approval_decide(request: HtmxHttpRequest, approval_id: str) -> HttpResponse:
    approval = _get_approval(request, approval_id)
    form = DecisionForm(request.POST)
    if not form.is_valid():
        messages.error(request, f"Nothing was decided: {form.problem()}")
        return redirect("console:approval", approval_id=approval.approval_id)
    approve = form.cleaned_data["decision"] == "approve"
    try:
        decided = services.approval_decide(
            approval=approval,
            by=request.user,  # type: ignore[arg-type]
            approve=approve,
            note=form.cleaned_data["note"],
            args_hash=form.cleaned_data["args_hash"],
        )
    except services.DecisionRefused as exc:
        messages.error(request, str(exc))
        return redirect("console:approval", approval_id=approval.approval_id)
    messages.success(request, _said(approval, decided, approve=approve))
    following = selectors.approval_next(user=request.user, after=decided)
    if following is None:
        return redirect("console:approvals")
    return redirect("console:approval", approval_id=following.approval_id)
