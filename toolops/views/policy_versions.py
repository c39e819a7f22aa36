"""The policy page's actions on versions: roll back to an earlier one (a new version with
its text, validated again), and a second operator's Confirm or anyone's Withdraw of a
proposal. Each is audited by toolops/policy/versions.py; a refusal (a version that does
not exist, a text that no longer validates, your own proposal) comes back on the page
with the core's words, and nothing is written."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from toolops.permissions import console_required, require_policy_editor
from toolops.policy import versions
from toolops.policy.document import PolicyError
from toolops.views.common import HtmxHttpRequest
from toolops.views.policy import policy_page
from toolops.views.policy_forms import RollbackForm


@require_POST
@console_required
def policy_rollback(request: HtmxHttpRequest, number: int) -> HttpResponse:
    require_policy_editor(request.user)
    form = RollbackForm(request.POST)
    if not form.is_valid():
        problems = [f"note: {e}" for e in form.errors.get("note", [])]
        return policy_page(request, refusals=problems, status=400)
    try:
        version = versions.rollback(
            number,
            note=form.cleaned_data["note"],
            actor=request.user,
            actor_name=request.user.get_username(),
            request=request,
            propose=versions.two_person(),
        )
    except PolicyError as exc:
        return policy_page(request, refusals=[str(exc)], status=400)
    if version.state == version.State.PROPOSED:
        messages.success(
            request,
            f"Rollback to v{number} proposed as v{version.number}: another operator must "
            "confirm it.",
        )
        return redirect("console:policy")
    messages.success(
        request, f"Rolled back to v{number}: v{version.number}, with its text, is in force."
    )
    return redirect("console:policy")


@require_POST
@console_required
def policy_confirm(request: HtmxHttpRequest, number: int) -> HttpResponse:
    require_policy_editor(request.user)
    try:
        version = versions.confirm(number, actor=request.user, request=request)
    except PolicyError as exc:
        return policy_page(request, refusals=[str(exc)], status=400)
    # Confirming numbers it after anything applied meanwhile: say its new number.
    messages.success(request, f"Proposal v{number} confirmed: in force as v{version.number}.")
    return redirect("console:policy")


@require_POST
@console_required
def policy_withdraw(request: HtmxHttpRequest, number: int) -> HttpResponse:
    require_policy_editor(request.user)
    try:
        versions.withdraw(number, actor=request.user, request=request)
    except PolicyError as exc:
        return policy_page(request, refusals=[str(exc)], status=400)
    messages.success(request, f"Proposal v{number} withdrawn: nothing changed.")
    return redirect("console:policy")
