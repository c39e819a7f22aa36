"""The notification pages: each person's choices (/console/account/notifications/, linked from their
name in the top bar) and the operators' outbox (/console/notifications/): every
delivery's state, attempts and last error."""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from toolops.notify.forms import NotificationChoicesForm
from toolops.notify.models import NotificationDelivery, NotificationEvent
from toolops.notify.outbox import delivery_retry
from toolops.notify.recipients import email_choices_save
from toolops.permissions import can_control_breakers, console_required
from toolops.views.common import HtmxHttpRequest, page_context

OUTBOX_ROWS = 200


@require_http_methods(["GET", "POST"])
@console_required
def profile(request: HtmxHttpRequest) -> HttpResponse:
    user = request.user
    form = NotificationChoicesForm(request.POST or None, user=user)
    if request.method == "POST" and form.is_valid():
        with transaction.atomic():
            user.email = form.cleaned_data["email"]
            user.save(update_fields=["email"])
            email_choices_save(user=user, kinds_on=form.cleaned_data["kinds"])
        messages.success(request, "Your notification choices are saved.")
        return redirect("console:account-notifications")
    status = 400 if request.method == "POST" else 200
    ctx = page_context(request, "account", form=form)
    return render(request, "notify/profile.html", ctx, status=status)


def _require_operator(request: HtmxHttpRequest) -> None:
    if not can_control_breakers(request.user):
        raise PermissionDenied("Only operators may see the notification outbox.")


@require_GET
@console_required
def outbox(request: HtmxHttpRequest) -> HttpResponse:
    _require_operator(request)
    status = request.GET.get("status", "")
    rows = NotificationDelivery.objects.select_related("event").order_by("-created_at", "-pk")
    if status in NotificationDelivery.Status.values:
        rows = rows.filter(status=status)
    unsent = NotificationEvent.objects.exclude(note="").order_by("-created_at")[:50]
    ctx = page_context(
        request,
        "notifications",
        deliveries=rows[:OUTBOX_ROWS],
        unsent=unsent,
        status=status,
        statuses=NotificationDelivery.Status.choices,
    )
    return render(request, "notify/outbox.html", ctx)


@require_POST
@console_required
def outbox_retry(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    _require_operator(request)
    delivery = get_object_or_404(NotificationDelivery, pk=pk)
    if delivery_retry(delivery_pk=delivery.pk):
        messages.success(request, f"The message to {delivery.target} will be sent again now.")
    else:
        delivery.refresh_from_db()
        messages.error(
            request,
            "Only a failed message can be sent again: this one is "
            f"{delivery.get_status_display()}.",
        )
    return redirect("console:notifications")
