"""The support desk (API.md "Processes and settings"): one ticket per dead-lettered
compensation. The queue and a ticket's page refresh themselves — pushed over Channels
when REDIS_URL is set, polled by htmx otherwise. Actions are plain POST forms that
redirect back (Post/Redirect/Get), each audited as a TicketEvent."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST
from django.views.decorators.vary import vary_on_headers

from compensations import desk, live, selectors, wording
from compensations.forms import AssignForm, BulkForm, CommentForm, NoteForm, TicketFilterForm
from compensations.models import Ticket
from toolops.notify import links
from toolops.permissions import console_required, require_ticket_worker
from toolops.templatetags.when import ago, waited
from toolops.tools import facts, registry
from toolops.tools.wording import error_sentence
from toolops.views.common import (
    HtmxHttpRequest,
    catalog,
    is_refresh,
    live_context,
    page_context,
    pretty,
)
from traces.services import redact


def _get_ticket(request: HtmxHttpRequest, pk: int) -> Ticket:
    """Support staff (and superusers) only; another console user → 403, none → 404."""
    require_ticket_worker(request.user)
    return get_object_or_404(
        Ticket.objects.select_related(
            "run__agent", "assignee", "compensation__call", "compensation__undo_call"
        ),
        pk=pk,
    )


def _live(**ctx: Any) -> dict[str, Any]:
    return live_context(push_path=live.PUSH_PATH, **ctx)


@require_GET
@vary_on_headers("HX-Request")
@console_required
def ticket_list(request: HtmxHttpRequest) -> HttpResponse:
    require_ticket_worker(request.user)
    if request.GET.get("tab") == "resolved":
        return _resolved(request)
    form = TicketFilterForm(request.GET)
    filters = form.filters()
    tickets = list(
        selectors.ticket_queue(filters=filters, user=request.user)[: selectors.QUEUE_LIMIT]
    )
    now = timezone.now()
    for ticket in tickets:
        _words(ticket)
        ticket.waited = waited(ticket.opened_at, now)  # type: ignore[attr-defined]
    ctx = _live(
        form=form, filters=filters, tickets=tickets, counts=selectors.ticket_counts(),
        limit=selectors.QUEUE_LIMIT, now=now, tools=sorted(catalog()), tab="open",
    )  # fmt: skip
    if is_refresh(request):
        return render(request, "compensations/tickets.html#ticket-table", ctx)
    return render(request, "compensations/tickets.html", page_context(request, "tickets", **ctx))


def _resolved(request: HtmxHttpRequest) -> HttpResponse:
    """`?tab=resolved`: closed tickets, newest first, page by page, each with who closed
    it, how (retried and succeeded, or fixed by hand) and the note."""
    page = Paginator(selectors.ticket_history(), selectors.HISTORY_PER_PAGE).get_page(
        request.GET.get("page")
    )
    ctx = page_context(
        request, "tickets", tab="resolved", page=page, counts=selectors.ticket_counts(),
        closed=[selectors.closed_row(ticket) for ticket in page.object_list],
    )  # fmt: skip
    return render(request, "compensations/tickets.html", ctx)


@require_GET
@vary_on_headers("HX-Request")
@console_required
def ticket_detail(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    ticket = _get_ticket(request, pk)
    if is_refresh(request):
        return render(
            request, "compensations/ticket.html#ticket-live", _live(**_ticket_context(ticket))
        )
    followed = links.opened(request.GET.get(links.PARAM, ""), request.user, page=request.path_info)
    if followed:
        messages.info(request, followed)
    return _ticket_page(request, ticket)


def _ticket_page(
    request: HtmxHttpRequest,
    ticket: Ticket,
    *,
    note_form: NoteForm | None = None,
    comment_form: CommentForm | None = None,
    status: int = 200,
) -> HttpResponse:
    """The whole ticket page; with a bound form that failed, shown again with its errors."""
    ctx = _live(
        **_ticket_context(ticket),
        note_form=note_form or NoteForm(),
        comment_form=comment_form or CommentForm(),
    )
    return render(
        request, "compensations/ticket.html", page_context(request, "tickets", **ctx), status=status
    )


def _words(ticket: Ticket) -> None:
    """What the desk's list shows of a ticket in plain words, set on the ticket: its title,
    its status as a label and its last error as a sentence naming the service."""
    compensation = ticket.compensation
    undone = compensation.call
    ticket.title = wording.ticket_title(  # type: ignore[attr-defined]
        ticket, undone=undone, spec=registry.get(undone.tool)
    )
    ticket.status_words = wording.status_words(compensation.status)  # type: ignore[attr-defined]
    error = error_sentence(
        compensation.last_error, tool=compensation.tool, spec=registry.get(compensation.tool)
    )
    ticket.error_words = error or compensation.problem  # type: ignore[attr-defined]


def _ticket_context(ticket: Ticket) -> dict[str, Any]:
    compensation = ticket.compensation
    undone = compensation.call
    undo_spec = registry.get(compensation.tool)
    call_spec = registry.get(undone.tool)
    events = list(ticket.events.select_related("actor"))
    for event in events:
        event.words = wording.event_words(event.kind)  # type: ignore[attr-defined]
    closed = wording.closing(events) if ticket.status == Ticket.Status.CLOSED else None
    rounds = selectors.ticket_rounds(ticket=ticket)
    now = timezone.now()
    is_open = ticket.status == Ticket.Status.OPEN
    health = selectors.undo_health(tool=compensation.tool, spec=undo_spec) if is_open else None
    for round_ in rounds:
        round_.error = error_sentence(
            round_.call.error_message, tool=compensation.tool, spec=undo_spec
        )
    return {
        "ticket": ticket,
        "title": wording.ticket_title(ticket, undone=undone, spec=call_spec),
        "undo_words": wording.tool_words(compensation.tool),
        "status_words": wording.status_words(compensation.status),
        "run_words": wording.run_words(ticket.run.status),
        "undone_title": wording.call_words(undone, call_spec),
        "undone_facts": facts.facts(call_spec, undone.args, undone.result),
        "health": health,
        "last_success_ago": ago(health.last_success, now) if health and health.last_success else "",
        "waited": waited(ticket.opened_at, now),
        "closed_ago": ago(ticket.closed_at, now) if ticket.closed_at else "",
        "closed_by": closed,
        "last_error": error_sentence(
            compensation.last_error, tool=compensation.tool, spec=undo_spec
        ),
        "compensation": compensation,
        "retry_at": selectors.retry_at(compensation, now),
        "undone": undone,
        # Shown to people redacted (traces/sensitive.py): by name, pattern, catalog or schema.
        "undo_args": pretty(redact(compensation.args, spec=undo_spec)),
        "call_args": pretty(redact(undone.args, spec=call_spec)),
        "call_result": pretty(redact(undone.result, spec=call_spec, result=True)),
        "rounds": rounds,
        "events": events,
        "now": now,
    }


def _back(ticket: Ticket) -> HttpResponseRedirect:
    return HttpResponseRedirect(reverse("console:ticket", args=[ticket.pk]))


@require_POST
@console_required
def ticket_assign(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    ticket = _get_ticket(request, pk)
    form = AssignForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Assign to whom? Choose “me” or “nobody”.")
        return _back(ticket)
    to = request.user if form.cleaned_data["to"] == "me" else None
    desk.ticket_assign(ticket=ticket, by=request.user, to=to)  # type: ignore[arg-type]
    messages.success(request, "Assigned to you." if to else "Unassigned.")
    return _back(ticket)


@require_POST
@console_required
def ticket_retry(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    ticket = _get_ticket(request, pk)
    try:
        ticket = desk.ticket_retry(ticket=ticket, by=request.user)  # type: ignore[arg-type]
    except desk.TicketActionRefused as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, wording.retry_queued(ticket.compensation))
    return _back(ticket)


@require_POST
@console_required
def ticket_resolve(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    ticket = _get_ticket(request, pk)
    form = NoteForm(request.POST)
    if not form.is_valid():
        return _ticket_page(request, ticket, note_form=form, status=400)
    try:
        desk.ticket_resolve(ticket=ticket, by=request.user, note=form.cleaned_data["note"])  # type: ignore[arg-type]
    except desk.TicketActionRefused as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Resolved by hand: {ticket.tool} is marked resolved.")
    return _back(ticket)


@require_POST
@console_required
def ticket_comment(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    ticket = _get_ticket(request, pk)
    form = CommentForm(request.POST)
    if not form.is_valid():
        return _ticket_page(request, ticket, comment_form=form, status=400)
    desk.ticket_comment(ticket=ticket, by=request.user, text=form.cleaned_data["text"])  # type: ignore[arg-type]
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
        problems = "; ".join(e for errors in form.errors.values() for e in errors)
        messages.error(request, f"Nothing was done: {problems}")
        return HttpResponseRedirect(back)
    tickets = list(Ticket.objects.filter(pk__in=form.cleaned_data["ids"]).order_by("pk"))
    outcome = desk.tickets_bulk(
        tickets=tickets,
        by=request.user,
        action=form.cleaned_data["action"],  # type: ignore[arg-type]
    )
    verb = "Retry queued for" if form.cleaned_data["action"] == "retry" else "Assigned to you:"
    if outcome["done"]:
        done = ", ".join(f"#{pk}" for pk in outcome["done"])
        messages.success(request, f"{verb} {done}.")
    for pk, why in outcome["refused"]:
        messages.warning(request, f"#{pk}: {why}")
    return HttpResponseRedirect(back)
