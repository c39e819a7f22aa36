"""The support desk (API.md "Processes and settings"): one ticket per dead-lettered
compensation. The queue and a ticket's page refresh themselves — pushed over Channels
when REDIS_URL is set, polled by htmx otherwise. Actions are plain POST forms that
redirect back (Post/Redirect/Get), each audited as a TicketEvent (actions.py)."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET
from django.views.decorators.vary import vary_on_headers

from compensations import live, selectors
from compensations.contact import ticket_contact_read
from compensations.forms import CommentForm, NoteForm, SnoozeForm, TicketFilterForm
from compensations.models import Ticket
from compensations.page import get_ticket, list_words, ticket_context
from toolops.notify import links
from toolops.permissions import console_required, require_ticket_worker
from toolops.templatetags.when import waited
from toolops.views.common import HtmxHttpRequest, catalog, is_refresh, live_context, page_context

# The queue's status filter → the tab that shows the same tickets.
TABS = {"open": "open", "snoozed": "snoozed", "closed": "resolved", "all": "all"}


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
    now = timezone.now()
    tickets = list(
        selectors.ticket_queue(filters=filters, user=request.user, now=now)[: selectors.QUEUE_LIMIT]
    )
    for ticket in tickets:
        list_words(ticket, now)
        ticket.waited = waited(ticket.opened_at, now)
    ctx = _live(
        form=form,
        filters=filters,
        tickets=tickets,
        counts=selectors.ticket_counts(now),
        limit=selectors.QUEUE_LIMIT,
        now=now,
        tools=sorted(catalog()),
        # The highlighted tab is the one whose tickets are shown.
        tab=TABS.get(filters["status"], "open"),
        workers=selectors.ticket_workers(),
    )
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
        request,
        "tickets",
        tab="resolved",
        history=True,
        page=page,
        counts=selectors.ticket_counts(),
        closed=[selectors.closed_row(ticket) for ticket in page.object_list],
    )
    return render(request, "compensations/tickets.html", ctx)


@require_GET
@never_cache  # it shows the customer's contact, read from the sealed args
@vary_on_headers("HX-Request")
@console_required
def ticket_detail(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    ticket = get_ticket(request, pk)
    if is_refresh(request):
        # The contact is not read again: the page keeps the one it showed (hx-preserve),
        # so a look is one audit entry, not one every few seconds.
        return render(
            request, "compensations/ticket.html#ticket-live", _live(**ticket_context(ticket))
        )
    followed = links.opened(request.GET.get(links.PARAM, ""), request.user, page=request.path_info)
    if followed:
        messages.info(request, followed)
    return ticket_page(request, ticket)


def ticket_page(
    request: HtmxHttpRequest,
    ticket: Ticket,
    *,
    note_form: NoteForm | None = None,
    comment_form: CommentForm | None = None,
    snooze_form: SnoozeForm | None = None,
    status: int = 200,
) -> HttpResponse:
    """The whole ticket page; with a bound form that failed, shown again with its errors."""
    ctx = _live(
        **ticket_context(ticket),
        contact=ticket_contact_read(ticket=ticket, user=request.user, request=request),
        note_form=note_form or NoteForm(),
        comment_form=comment_form or CommentForm(),
        snooze_form=snooze_form or SnoozeForm(initial={"until": "1h"}),
        workers=selectors.ticket_workers(),
    )
    return render(
        request, "compensations/ticket.html", page_context(request, "tickets", **ctx), status=status
    )
