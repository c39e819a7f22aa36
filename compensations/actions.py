"""The support desk's actions: plain POST forms that redirect back (Post/Redirect/Get).
Each calls one service (desk.py, snooze.py), which audits it and writes it on the
ticket's thread; a refusal comes back as a message in the desk's words."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_POST

from compensations import desk, wording
from compensations.forms import AssignForm, BulkForm, CommentForm, NoteForm, SnoozeForm
from compensations.models import Ticket
from compensations.page import get_ticket
from compensations.snooze import snooze_choices, ticket_snooze, ticket_unsnooze
from compensations.views import ticket_page
from toolops.permissions import console_required, require_ticket_worker
from toolops.templatetags.when import at_words
from toolops.views.common import HtmxHttpRequest


def _back(ticket: Ticket) -> HttpResponseRedirect:
    return HttpResponseRedirect(reverse("console:ticket", args=[ticket.pk]))


def _problems(form: Any) -> str:
    return " ".join(e for errors in form.errors.values() for e in errors)


@require_POST
@console_required
def ticket_assign(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    ticket = get_ticket(request, pk)
    form = AssignForm(request.POST)
    if not form.is_valid():
        messages.error(request, f"Not assigned: {_problems(form)}")
        return _back(ticket)
    to = {"me": request.user, "nobody": None}.get(
        form.cleaned_data["to"], form.cleaned_data.get("person")
    )
    try:
        desk.ticket_assign(ticket=ticket, by=request.user, to=to)
    except desk.TicketActionRefused as exc:
        messages.error(request, f"Not assigned: {exc}")
        return _back(ticket)
    if to is None:
        messages.success(request, "Unassigned.")
    elif to == request.user:
        messages.success(request, "Assigned to you.")
    else:
        messages.success(request, f"Assigned to {to.get_username()}.")
    return _back(ticket)


@require_POST
@console_required
def ticket_retry(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    ticket = get_ticket(request, pk)
    try:
        ticket = desk.ticket_retry(ticket=ticket, by=request.user)
    except desk.TicketActionRefused as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, wording.retry_queued(ticket.compensation))
    return _back(ticket)


@require_POST
@console_required
def ticket_resolve(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    ticket = get_ticket(request, pk)
    form = NoteForm(request.POST)
    if not form.is_valid():
        return ticket_page(request, ticket, note_form=form, status=400)
    try:
        desk.ticket_resolve(ticket=ticket, by=request.user, note=form.cleaned_data["note"])
    except desk.TicketActionRefused as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Resolved by hand: {ticket.tool} is marked resolved.")
    return _back(ticket)


@require_POST
@console_required
def ticket_comment(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    ticket = get_ticket(request, pk)
    form = CommentForm(request.POST)
    if not form.is_valid():
        return ticket_page(request, ticket, comment_form=form, status=400)
    desk.ticket_comment(ticket=ticket, by=request.user, text=form.cleaned_data["text"])
    return _back(ticket)


@require_POST
@console_required
def ticket_snooze_view(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    ticket = get_ticket(request, pk)
    form = SnoozeForm(request.POST)
    if not form.is_valid():
        messages.error(request, f"Not snoozed: {_problems(form)}")
        return ticket_page(request, ticket, snooze_form=form, status=400)
    now = timezone.now()
    choice = form.cleaned_data["until"]
    until = form.cleaned_data["at"] if choice == "custom" else snooze_choices(now)[choice]
    try:
        ticket_snooze(ticket=ticket, by=request.user, until=until)
    except desk.TicketActionRefused as exc:
        messages.error(request, f"Not snoozed: {exc}")
        return ticket_page(request, ticket, snooze_form=form, status=400)
    messages.success(
        request, f"Snoozed until {at_words(until, now)}: it is back in the Open list then."
    )
    return _back(ticket)


@require_POST
@console_required
def ticket_unsnooze_view(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    ticket = get_ticket(request, pk)
    try:
        ticket_unsnooze(ticket=ticket, by=request.user)
    except desk.TicketActionRefused as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, "Back in the Open list.")
    return _back(ticket)


@require_POST
@console_required
def tickets_bulk(request: HtmxHttpRequest) -> HttpResponse:
    require_ticket_worker(request.user)
    back = reverse("console:tickets")
    query = request.POST.get("query", "")
    if query and all(c.isalnum() or c in "=&_-%+." for c in query):
        back = f"{back}?{query}"
    form = BulkForm(request.POST)
    if not form.is_valid():
        messages.error(request, f"Nothing was done: {_problems(form)}")
        return HttpResponseRedirect(back)
    tickets = list(Ticket.objects.filter(pk__in=form.cleaned_data["ids"]).order_by("pk"))
    action = "retry" if form.cleaned_data["action"] == "retry" else "assign"
    to = form.cleaned_data.get("person") if form.cleaned_data["action"] == "assign_to" else None
    try:
        outcome = desk.tickets_bulk(tickets=tickets, by=request.user, action=action, to=to)
    except desk.TicketActionRefused as exc:
        messages.error(request, f"Nothing was done: {exc}")
        return HttpResponseRedirect(back)
    whom = "you" if to is None or to == request.user else to.get_username()
    said = wording.bulk_done(action=action, to=whom, done=outcome.done, skipped=outcome.skipped)
    if said:
        (messages.success if outcome.done else messages.warning)(request, said)
    for pk, why in outcome.refused:
        messages.warning(request, wording.bulk_refused(action=action, pk=pk, why=why))
    return HttpResponseRedirect(back)
