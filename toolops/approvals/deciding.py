"""Deciding an approval: the Decide box's one form, posted to
`/console/approvals/<approval_id>/decide/`.

Nothing is decided by accident:
- an approve POST for a call of an irreversible tool without `confirmed` decides nothing
  and answers a confirmation page that names what it releases (with JavaScript the page
  asks the same in a `<dialog>` first, so this is the guard for everything else);
- an approve POST that carries a reason typed to reject decides nothing and asks which was
  meant, keeping both texts;
- a decision the service refuses (decided already, expired, other args, …) changes
  nothing, and what was typed comes back on the page.

A decision that goes through lands on the next approval waiting for this reviewer, with
"next: 1 of 2 waiting" and `?after=<the decided one>`, so its page can mark what differs
from the one just decided; with none left, on the queue."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST

from toolops.approvals import selectors, services
from toolops.approvals.confirming import confirmation, needs_confirmation
from toolops.approvals.forms import DecisionForm
from toolops.approvals.models import Approval
from toolops.approvals.pages import DRAFT, action, get_approval, keep_draft, title_of
from toolops.permissions import console_required
from toolops.views.common import HtmxHttpRequest, catalog, page_context


@require_POST
@never_cache  # a confirmation page holds the notes typed
@console_required
def approval_decide(request: HtmxHttpRequest, approval_id: str) -> HttpResponse:
    approval = get_approval(request, approval_id)
    form = DecisionForm(request.POST)
    if not form.is_valid():
        return _refused(request, approval, form, f"Nothing was decided: {form.problem()}")
    asked = _ask_first(request, approval, form)
    if asked is not None:
        return asked
    note = form.cleaned_data["note"] if form.approve else form.reason_to_reject()
    try:
        decided = services.approval_decide(
            approval=approval,
            by=request.user,
            approve=form.approve,
            note=note,
            args_hash=form.cleaned_data["args_hash"],
        )
    except services.DecisionRefused as exc:
        return _refused(request, approval, form, str(exc))
    request.session.pop(DRAFT.format(approval.approval_id), None)
    return _onwards(request, approval, decided, approve=form.approve)


def _refused(
    request: HtmxHttpRequest, approval: Approval, form: DecisionForm, said: str
) -> HttpResponse:
    """Nothing decided: say why on the approval's page, with what was typed given back."""
    keep_draft(request, approval, form.typed())
    messages.error(request, said)
    return redirect("console:approval", approval_id=approval.approval_id)


def _ask_first(
    request: HtmxHttpRequest, approval: Approval, form: DecisionForm
) -> HttpResponse | None:
    """The page to answer instead of deciding, None to decide now."""
    if not form.approve:
        return None
    # A decision the service would refuse goes straight to it, whose refusal says why:
    # a question before a decision that cannot be taken would only delay that.
    refused = services.approval_refusal(
        approval=approval,
        by=request.user,
        approve=True,
        args_hash=form.cleaned_data["args_hash"],
    )
    if refused is not None:
        return None
    if form.unheard_reason():
        return _ask(request, approval, form, ask="which")
    unconfirmed = not form.cleaned_data["confirmed"]
    if unconfirmed and needs_confirmation(approval.tool, catalog().get(approval.tool)):
        return _ask(request, approval, form, ask="confirm")
    return None


def _ask(
    request: HtmxHttpRequest, approval: Approval, form: DecisionForm, *, ask: str
) -> HttpResponse:
    """The question as a page of its own (works without JavaScript): "which" — a reason
    to reject was typed, approve or reject? — or "confirm" — approve this charge?
    Cancel goes back to the approval, where the texts typed come back."""
    keep_draft(request, approval, form.typed())
    call = selectors.held_call(approval)
    spec = catalog().get(approval.tool)
    title = title_of(call, spec) if call is not None else approval.tool
    args = call.args if call is not None else {}
    ctx = page_context(
        request,
        "approvals",
        approval=approval,
        call=call,
        ask=ask,
        action=title,
        typed=form.typed(),
        discard_reason=form.cleaned_data["discard_reason"],
        args_hash=approval.args_hash,
        confirm=confirmation(tool=approval.tool, spec=spec, title=title, args=args),
    )
    return render(request, "approvals/confirm.html", ctx)


def _said(approval: Approval, decided: Approval, *, approve: bool) -> str:
    """The message after a decision; `approval` as the page read it, `decided` as the
    service left it."""
    call = selectors.held_call(approval)
    what = f"“{action(approval, call, catalog())}”"
    if call is not None:
        what = f"{what} ({call.tool_call_id} in run {approval.run.run_id})"
    if not approve:
        return f"Rejected {what}: the agent is told why"
    if decided.status == Approval.Status.APPROVED:
        return f"Approved {what}: the worker runs it now"
    approved = decided.votes.filter(decision="approve").count()
    return (
        f"Approved {what}: {approved} of {decided.approvals_required} approvals; it waits "
        "for another reviewer"
    )


def _onwards(
    request: HtmxHttpRequest, approval: Approval, decided: Approval, *, approve: bool
) -> HttpResponse:
    """On to the oldest approval left to this reviewer — always the first of those
    waiting, hence "1 of" — marked against this one; or the queue when none is left."""
    said = _said(approval, decided, approve=approve)
    following = selectors.approval_next(user=request.user, after=decided)
    if following.approval is None:
        messages.success(request, f"{said}. Nothing else waits for you.")
        return redirect("console:approvals")
    messages.success(request, f"{said} · next: 1 of {following.waiting} waiting")
    page = reverse("console:approval", args=[following.approval.approval_id])
    return redirect(f"{page}?after={decided.approval_id}")
