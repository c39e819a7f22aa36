"""The desk's tabs: Open (the queue) and Resolved (closed tickets, newest first, with who
closed each, how — retried and succeeded, or fixed by hand — and the note), as links that
work without JavaScript, paginated."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from compensations import selectors
from compensations.desk import ticket_resolve
from compensations.models import Ticket, TicketEvent
from compensations.tickets import ticket_close
from tests.console.conftest import logged_in

from .conftest import dead_letter

pytestmark = pytest.mark.django_db


def test_the_resolved_tab_lists_closed_tickets_with_who_how_and_the_note(
    support: Any, agent_a: Any, console_catalog: Any
) -> None:
    by_hand = dead_letter(agent_a[0], "r-by-hand")
    retried = dead_letter(agent_a[0], "r-retried", tool="release_stock")
    dead_letter(agent_a[0], "r-still-open")
    ticket_resolve(ticket=by_hand, by=support, note="Cancelled order o-1 in the shop admin.")
    ticket_close(retried, None, TicketEvent.Kind.SUCCEEDED, "release_stock succeeded (1 attempt).")
    Ticket.objects.filter(pk=by_hand.pk).update(closed_at=timezone.now() - timedelta(hours=1))

    response = logged_in(support).get("/console/tickets/", {"tab": "resolved"})

    assert response.status_code == 200
    rows = [(r.ticket.run.run_id, r.by, r.how, r.note) for r in response.context["closed"]]
    assert rows == [  # newest closing first
        ("r-retried", "ToolOps", "retried and succeeded", "release_stock succeeded (1 attempt)."),
        ("r-by-hand", "sam", "fixed by hand", "Cancelled order o-1 in the shop admin."),
    ]
    page = response.content.decode()
    assert "r-still-open" not in page
    assert (
        '<a href="?tab=resolved" aria-current="page">Resolved <span class="badge">2</span></a>'
        in page
    )
    assert '<a href="?tab=open">Open <span class="badge">1</span></a>' in page
    assert '<time datetime="' in page.split(f'id="ticket-{by_hand.pk}"')[1]


def test_the_resolved_tab_is_paginated(
    support: Any, agent_a: Any, console_catalog: Any, monkeypatch: Any
) -> None:
    monkeypatch.setattr(selectors, "HISTORY_PER_PAGE", 1)
    for run_id in ("r-a", "r-b"):
        ticket_resolve(ticket=dead_letter(agent_a[0], run_id), by=support, note="done by hand")
    client = logged_in(support)

    first = client.get("/console/tickets/", {"tab": "resolved"}).content.decode()
    second = client.get("/console/tickets/", {"tab": "resolved", "page": "2"}).content.decode()

    assert "<code>r-b</code>" in first and "<code>r-a</code>" not in first
    assert "<code>r-a</code>" in second and "<code>r-b</code>" not in second
    assert 'href="?tab=resolved&amp;page=2">older ›</a>' in first


def test_the_open_tab_says_just_now_not_zero_minutes(
    support: Any, agent_a: Any, console_catalog: Any
) -> None:
    dead_letter(agent_a[0], "r-new")

    page = logged_in(support).get("/console/tickets/").content.decode()

    assert ">just now</time>" in page
    assert re.search(r"\b0 min|0\xa0minutes", page) is None
