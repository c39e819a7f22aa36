"""The reviewer queue and an approval's page (API.md: an approval's `url` shows the call's
tool_call_id and run_id and has buttons named "Approve" and "Reject"). Both refresh
themselves like the support desk — pushed over Channels when REDIS_URL is set, polled by
htmx otherwise. Deciding is deciding.py: a plain POST form that redirects
(Post/Redirect/Get) to the next approval waiting, so a reviewer can work down the queue.

The page shows every value redacted by one set of rules — the title, the facts, the
possible duplicate, the args — so opening it reads nothing sealed and leaves no audit
entry; the full args are a deliberate click away (traces/views/full_args.py, audited)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET
from django.views.decorators.vary import vary_on_headers

from toolops.approvals import selectors
from toolops.approvals.compare import duplicate_comparison
from toolops.approvals.confirming import confirmation, needs_confirmation
from toolops.approvals.consumers import PUSH_PATH
from toolops.approvals.deciding import approval_decide  # noqa: F401 - the URLconf's name
from toolops.approvals.forms import ApprovalFilterForm
from toolops.approvals.models import Approval
from toolops.approvals.pages import (
    action,
    args_problem,
    draft,
    get_approval,
    header,
    step,
    title_of,
)
from toolops.approvals.wording import consequence, reason_label, reason_text, undo_tool
from toolops.models import Agent, ToolCall
from toolops.notify import links
from toolops.permissions import console_required, require_reviewer
from toolops.templatetags.when import waited
from toolops.tools.spec import ToolSpec
from toolops.views.common import HtmxHttpRequest, catalog, is_refresh, live_context, page_context

# Who may open a call's full args page without reviewing it (traces/views/full_args.py).
FULL_ARGS_PERMISSION = "traces.view_full_args"


def _live(**ctx: Any) -> dict[str, Any]:
    return live_context(push_path=PUSH_PATH, **ctx)


# -- the queue ---------------------------------------------------------------------------


@dataclass
class QueueRow:
    approval: Approval
    call: ToolCall | None
    action: str
    reason: str  # the reason's badge, aware of the catalog's undo ("undone only by refund")


def _row(approval: Approval, specs: dict[str, ToolSpec]) -> QueueRow:
    call = selectors.held_call(approval)
    label = reason_label(approval.reason, approval.get_reason_display(), specs.get(approval.tool))
    return QueueRow(approval, call, action(approval, call, specs), label)


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
    rows = [_row(approval, specs) for approval in approvals[: selectors.QUEUE_LIMIT]]
    ctx = _live(
        form=form,
        filters=filters,
        rows=rows,
        counts=selectors.approval_counts(),
        limit=selectors.QUEUE_LIMIT,
        now=timezone.now(),
    )
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
    ctx = page_context(
        request,
        "approvals",
        tab=tab,
        tabs=selectors.approval_tab_counts(),
        page=page,
        history=[_row(approval, specs) for approval in page.object_list],
    )
    return render(request, "approvals/queue.html", ctx)


# -- an approval's page ------------------------------------------------------------------------


def _status_context(request: HtmxHttpRequest, approval: Approval) -> dict[str, Any]:
    """What the page's live region shows: the call's header (marked against the approval
    decided just before, `?after=`) and the decision so far."""
    call = selectors.held_call(approval)
    specs = catalog()
    spec = specs.get(approval.tool)
    now = timezone.now()
    return {
        "approval": approval,
        "call": call,
        "action": action(approval, call, specs),
        "header": header(approval, call, specs, after=request.GET.get("after", "")),
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


def _full_args_url(request: HtmxHttpRequest, call: ToolCall | None) -> str:
    """The full-args page of the held call, for whoever may open it: a reviewer while the
    call waits for them, else holders of view_full_args. "" for anyone else."""
    if call is None:
        return ""
    waiting = call.status == ToolCall.Status.PENDING_APPROVAL
    if waiting or request.user.has_perm(FULL_ARGS_PERMISSION):
        return reverse("console:call_args", args=[call.call_id])
    return ""


def _decision_context(
    request: HtmxHttpRequest, approval: Approval, call: ToolCall | None
) -> dict[str, Any]:
    """The Decide box: the notes typed before (given back once), and the confirmation an
    approval asks first when the tool cannot be taken back by a click."""
    spec = catalog().get(approval.tool)
    decidable = approval.status == Approval.Status.PENDING and call is not None
    confirm = None
    if decidable and call is not None and needs_confirmation(approval.tool, spec):
        title = title_of(call, spec)
        confirm = confirmation(tool=approval.tool, spec=spec, title=title, args=call.args)
    return {
        "decidable": decidable,
        "confirm": confirm,
        "draft": _draft(request, approval, decidable=decidable),
        "own_agent": approval.run.agent.owner_id == request.user.pk,
        "problem": args_problem(call) if decidable and call is not None else "",
    }


def _draft(request: HtmxHttpRequest, approval: Approval, *, decidable: bool) -> dict[str, Any]:
    """The notes typed before nothing was decided: given back once, and dropped once
    there is nothing left to decide here."""
    typed = draft(request, approval)
    return typed if decidable else {}


def _duplicate_context(approval: Approval, call: ToolCall | None, now: datetime) -> dict[str, Any]:
    """A possible duplicate: its facts beside the held call's, at the top of the page;
    its args and result as JSON under Technical details."""
    duplicate = approval.duplicate_of
    if duplicate is None:
        return {"duplicate": None, "comparison": None}
    specs = catalog()
    spec = specs.get(approval.tool)
    comparison = None
    if call is not None:
        comparison = duplicate_comparison(
            spec=spec,
            this=call,
            this_title=title_of(call, spec),
            this_run=approval.run.run_id,
            done=duplicate,
            done_title=title_of(duplicate, specs.get(duplicate.tool)),
            now=now,
        )
    return {"duplicate": step(duplicate, specs), "comparison": comparison}


@require_GET
@never_cache  # a reviewer's notes typed before may come back in it
@vary_on_headers("HX-Request")
@console_required
def approval_detail(request: HtmxHttpRequest, approval_id: str) -> HttpResponse:
    approval = get_approval(request, approval_id)
    ctx = _live(**_status_context(request, approval))
    if is_refresh(request):
        return render(request, "approvals/approval.html#approval-live", ctx)
    followed = links.opened(request.GET.get(links.PARAM, ""), request.user, page=request.path_info)
    if followed:
        messages.info(request, followed)
    specs = catalog()
    call = ctx["call"]
    ctx.update(
        held=step(call, specs) if call else None,
        earlier=[step(c, specs) for c in selectors.earlier_calls(call=call, run=approval.run)]
        if call
        else [],
        earlier_limit=selectors.EARLIER_LIMIT,
        # The args hash as this page shows it: the decision names it, and the service
        # refuses it if the approval holds other args by then.
        args_hash=approval.args_hash,
        full_args_url=_full_args_url(request, call),
        **_decision_context(request, approval, call),
        **_duplicate_context(approval, call, ctx["now"]),
    )
    return render(request, "approvals/approval.html", page_context(request, "approvals", **ctx))
