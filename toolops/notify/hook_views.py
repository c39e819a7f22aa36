"""The operators' webhooks page (/console/notifications/webhooks/): each group's webhook
from the environment (read-only: "set by TOOLOPS_WEBHOOK_…"), those added in the
console, a form to add one, and per webhook "Send a test" and (console ones) "Remove".

A made secret is shown once, on the page that answers the add (never stored in the
session or a message): like an agent's token, it cannot be read back afterwards."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from toolops.notify import hook_admin, hooks
from toolops.notify.forms import WebhookForm
from toolops.notify.models import Webhook
from toolops.permissions import can_control_breakers, console_required
from toolops.views.common import HtmxHttpRequest, page_context


def _require_operator(request: HtmxHttpRequest) -> None:
    if not can_control_breakers(request.user):
        raise PermissionDenied("Only operators may see and change the webhooks.")


def _page(request: HtmxHttpRequest, form: WebhookForm, status: int = 200) -> HttpResponse:
    ctx = page_context(
        request,
        "notifications",
        webhooks=hooks.webhooks_listed(),
        groups=settings.TOOLOPS_WEBHOOK_GROUPS,
        form=form,
        secret_min=settings.TOOLOPS_WEBHOOK_SECRET_MIN,
    )
    return render(request, "notify/webhooks.html", ctx, status=status)


@require_GET
@console_required
def webhook_list(request: HtmxHttpRequest) -> HttpResponse:
    _require_operator(request)
    return _page(request, WebhookForm())


@never_cache
@require_POST
@console_required
def webhook_add(request: HtmxHttpRequest) -> HttpResponse:
    _require_operator(request)
    form = WebhookForm(request.POST)
    if not form.is_valid():
        return _page(request, form, status=400)
    try:
        added = hook_admin.webhook_add(
            group=form.cleaned_data["group"],
            url=form.cleaned_data["url"],
            secret=form.secret_given(),
            label=form.cleaned_data["label"],
            by=request.user,
            request=request,
        )
    except hooks.BadWebhook as bad:
        form.add_error(bad.field if bad.field in form.fields else None, str(bad))
        return _page(request, form, status=400)
    ctx = page_context(request, "notifications", added=added)
    return render(request, "notify/webhook_added.html", ctx)


def _listed(target: str) -> hooks.Listed:
    """The webhook a test names: a group's environment one, or a console one by number."""
    group, _, number = target.partition("#")
    if not number:
        if group not in settings.TOOLOPS_WEBHOOKS:
            raise Http404("no such webhook")
        return hooks.Listed(group, hooks.shown_url(settings.TOOLOPS_WEBHOOKS[group][0]))
    hook = get_object_or_404(Webhook, pk=int(number) if number.isdigit() else 0, group=group)
    return hooks.Listed(hook.group, hook.shown, hook)


@require_POST
@console_required
def webhook_test(request: HtmxHttpRequest) -> HttpResponse:
    _require_operator(request)
    listed = _listed(request.POST.get("target", ""))
    tested = hook_admin.webhook_test(listed=listed, by=request.user, request=request)
    where = f"the {listed.group} group's webhook ({listed.shown})"
    if tested.ok:
        messages.success(request, f"Test sent to {where}: {tested.said}")
    else:
        messages.error(request, f"The test to {where} did not arrive: {tested.said}")
    return redirect("console:webhooks")


@require_POST
@console_required
def webhook_remove(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    _require_operator(request)
    hook = get_object_or_404(Webhook, pk=pk)
    target, shown = hook.target, hook.shown
    failed = hook_admin.webhook_remove(hook=hook, by=request.user, request=request)
    said = f"Removed the webhook {target} ({shown})."
    if failed:
        said += f" {failed} message{'s' if failed != 1 else ''} waiting for it failed with it."
    messages.success(request, said)
    return redirect("console:webhooks")
