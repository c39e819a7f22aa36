"""Bulk actions act on open tickets only and say what they skipped, in the desk's words;
a ticket is assigned to another person who may work tickets, audited, and never to
someone who may not."""

from __future__ import annotations

from typing import Any

import pytest

from compensations.desk import (
    TicketActionRefused,
    ticket_assign,
    ticket_resolve,
    ticket_retry,
    tickets_bulk,
)
from compensations.models import Compensation, Ticket
from tests.console.conftest import logged_in, make_user
from toolops.audit.models import AuditEntry
from toolops.models import Agent

from .conftest import dead_letter

pytestmark = pytest.mark.django_db
ONLY_SUPPORT = "only support staff and superusers can be assigned one."
JARGON = ("compensation", "dead_letter", "dead-letter", "round", "idempotency")


def mixed(agent: Agent, support: Any) -> tuple[list[Ticket], list[Ticket]]:
    """Two open tickets and two closed ones (fixed by hand)."""
    tickets = [dead_letter(agent, f"r-m{n}") for n in range(4)]
    for closed in tickets[1::2]:
        ticket_resolve(ticket=closed, by=support, note="Cancelled in the shop admin.")
    return tickets[0::2], tickets[1::2]


def messages_of(response: Any) -> list[str]:
    return [str(m) for m in response.context["messages"]]


def test_bulk_assign_skips_closed_tickets_and_says_so(
    support: Any, agent_a: tuple[Agent, str]
) -> None:
    opened, closed = mixed(agent_a[0], support)
    ids = sorted(t.pk for t in opened + closed)

    response = logged_in(support).post(
        "/console/tickets/bulk/", {"action": "assign", "ids": ids}, follow=True
    )

    a, b = sorted(t.pk for t in opened)
    c, d = sorted(t.pk for t in closed)
    assert messages_of(response) == [
        f"Assigned 2 tickets to you: #{a}, #{b}; skipped 2 closed tickets: #{c}, #{d} "
        "(only open tickets are acted on)."
    ]
    assert set(Ticket.objects.filter(assignee=support).values_list("pk", flat=True)) == {a, b}
    assert AuditEntry.objects.filter(action="ticket.assign").count() == 2


def test_bulk_retry_skips_closed_tickets_and_speaks_plainly(
    support: Any, agent_a: tuple[Agent, str]
) -> None:
    opened, closed = mixed(agent_a[0], support)
    running = opened[0]
    ticket_retry(ticket=running, by=support)  # its retry is queued: refused, in words
    ids = [t.pk for t in opened + closed]

    response = logged_in(support).post(
        "/console/tickets/bulk/", {"action": "retry", "ids": ids}, follow=True
    )

    said = messages_of(response)
    c, d = sorted(t.pk for t in closed)
    assert said == [
        f"Retry queued for 1 ticket: #{opened[1].pk}; skipped 2 closed tickets: #{c}, #{d} "
        "(only open tickets are acted on).",
        f"#{running.pk} not retried: a retry is already running: wait for its outcome.",
    ]
    for text in said:
        assert not any(word in text.lower() for word in JARGON), text
    for ticket in closed:
        assert Compensation.objects.get(ticket=ticket).status == "resolved"


def test_bulk_on_closed_tickets_only_does_nothing_and_warns(
    support: Any, agent_a: tuple[Agent, str]
) -> None:
    _, closed = mixed(agent_a[0], support)

    response = logged_in(support).post(
        "/console/tickets/bulk/", {"action": "assign", "ids": [t.pk for t in closed]}, follow=True
    )

    [message] = list(response.context["messages"])
    assert message.level_tag == "warning"
    assert str(message).startswith("Skipped 2 closed tickets: ")
    assert not Ticket.objects.filter(assignee__isnull=False).exists()


def test_assign_to_another_person_audited(
    support: Any, ticket: Ticket, django_user_model: Any
) -> None:
    sue = make_user(django_user_model, "sue", "support")

    response = logged_in(support).post(
        f"/console/tickets/{ticket.pk}/assign/", {"to": "user", "user": "sue"}, follow=True
    )

    assert "Assigned to sue." in messages_of(response)
    ticket.refresh_from_db()
    assert ticket.assignee == sue
    assert ticket.events.last().text == "to sue"
    entry = AuditEntry.objects.get(action="ticket.assign")
    assert (entry.actor_username, entry.detail, entry.summary) == (
        "sam",
        {"to": "sue"},
        "Assigned to sue",
    )


def test_bulk_assign_to_another_person_and_bad_input(
    support: Any, reviewer: Any, agent_a: tuple[Agent, str], django_user_model: Any
) -> None:
    sue = make_user(django_user_model, "sue", "support")
    one, two = dead_letter(agent_a[0], "r-1"), dead_letter(agent_a[0], "r-2")
    client = logged_in(support)
    ids = [one.pk, two.pk]

    def bulk(user: str) -> list[str]:
        data = {"action": "assign_to", "ids": ids, "user": user}
        return messages_of(client.post("/console/tickets/bulk/", data, follow=True))

    refused = [bulk(user) for user in ("rita", "nobody-here", "")]
    assert not Ticket.objects.filter(assignee__isnull=False).exists()
    done = bulk("sue")

    assert refused == [
        [f"Nothing was done: rita cannot work tickets: {ONLY_SUPPORT}"],
        ["Nothing was done: There is no user “nobody-here”: choose one from the list."],
        ["Nothing was done: Choose whom to assign it to."],
    ]
    assert done == [f"Assigned 2 tickets to sue: #{one.pk}, #{two.pk}."]
    assert set(Ticket.objects.values_list("assignee", flat=True)) == {sue.pk}


def test_the_services_refuse_closed_tickets_and_people_who_cannot_work_them(
    support: Any, reviewer: Any, ticket: Ticket, django_user_model: Any
) -> None:
    gone = make_user(django_user_model, "gone", "support", is_active=False)
    for person in (reviewer, gone):
        with pytest.raises(TicketActionRefused, match="cannot work tickets"):
            ticket_assign(ticket=ticket, by=support, to=person)
    ticket_resolve(ticket=ticket, by=support, note="Done by hand.")
    with pytest.raises(TicketActionRefused, match="closed"):
        ticket_assign(ticket=ticket, by=support, to=support)
    with pytest.raises(TicketActionRefused, match="closed"):
        ticket_retry(ticket=ticket, by=support)
    with pytest.raises(TicketActionRefused, match="Unknown action"):
        tickets_bulk(tickets=[ticket], by=support, action="explode")
    ticket.refresh_from_db()
    assert ticket.assignee is None
    assert not AuditEntry.objects.filter(action="ticket.assign").exists()


def test_the_assign_select_lists_only_people_who_may_work_tickets(
    support: Any, reviewer: Any, superuser: Any, ticket: Ticket, django_user_model: Any
) -> None:
    make_user(django_user_model, "gone", "support", is_active=False)

    page = logged_in(support).get(f"/console/tickets/{ticket.pk}/").content.decode()

    select = page[page.index('<select name="user" id="assign-user">') :]
    select = select[: select.index("</select>")]
    assert 'value="admin"' in select and 'value="sam"' in select
    assert 'value="rita"' not in select and 'value="gone"' not in select
