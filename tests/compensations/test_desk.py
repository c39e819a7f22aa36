"""The support desk's pages and actions (API.md: /console/tickets/, "Retry", "Resolve"):
who may use them, what each action changes, and bad input that changes nothing."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from compensations.models import Compensation, Ticket, TicketEvent
from tests.console.conftest import logged_in
from toolops.models import IdempotencyRecord, Run, ToolCall

from .conftest import dead_letter

pytestmark = pytest.mark.django_db


def actions(ticket: Ticket) -> list[tuple[str, str | None, str]]:
    return [
        (e.kind, e.actor.get_username() if e.actor else None, e.text)
        for e in TicketEvent.objects.filter(ticket=ticket)
    ]


def test_it_lists_open_tickets_oldest_first_with_run_and_undo_tool(
    support: Any, agent_a: Any, console_catalog: Any
) -> None:
    first = dead_letter(agent_a[0], "r-old")
    second = dead_letter(agent_a[0], "r-new", tool="release_stock")

    response = logged_in(support).get("/console/tickets/")

    assert response.status_code == 200
    page = response.content.decode()
    assert page.index("r-old") < page.index("r-new")
    assert f'href="/console/tickets/{first.pk}/"' in page
    assert f'href="/console/tickets/{second.pk}/"' in page
    assert "<code>release_stock</code>" in page
    assert 'class="badge count-open">2<' in page
    # With no shared channel layer the table polls for changes.
    assert 'hx-trigger="every 3s"' in page


def test_it_filters_by_status_tool_assignee_and_mine(
    support: Any, agent_a: Any, console_catalog: Any, django_user_model: Any
) -> None:
    from compensations.desk import ticket_assign

    mine = dead_letter(agent_a[0], "r-mine")
    other = dead_letter(agent_a[0], "r-other", tool="release_stock")
    ticket_assign(ticket=mine, by=support, to=support)
    client = logged_in(support)

    def shown(query: str) -> set[str]:
        page = client.get(f"/console/tickets/?{query}").content.decode()
        return {r for r in ("r-mine", "r-other") if f"<code>{r}</code>" in page}

    assert shown("") == {"r-mine", "r-other"}
    assert shown("tool=release_stock") == {"r-other"}
    assert shown("mine=on") == {"r-mine"}
    assert shown("assignee=none") == {"r-other"}
    assert shown(f"assignee={support.username}") == {"r-mine"}
    assert shown("status=closed") == set()
    assert shown("age=1d") == set()  # both opened just now
    # An invalid filter value is ignored, not an error page.
    assert shown("age=forever&status=bogus") == {"r-mine", "r-other"}
    assert other.status == "open"


def test_it_shows_a_ticket_with_run_compensation_call_and_attempts(
    support: Any, agent_a: Any, console_catalog: Any
) -> None:
    ticket = dead_letter(agent_a[0], "r-page", args={"order_id": "o-1", "api_key": "sk-live-1"})

    page = logged_in(support).get(f"/console/tickets/{ticket.pk}/").content.decode()

    assert f'href="/console/runs/{ticket.run_id}/"' in page
    assert "<code>r-page</code>" in page
    assert "cancel_order" in page and "create_order" in page
    assert "tc-r-page" in page
    for number in (1, 2, 3):
        assert f"req-r-page-{number}" in page
    assert "503 Service Unavailable" in page
    # Sensitive fields are redacted; the rest of the args are shown.
    assert "sk-live-1" not in page
    assert "[redacted]" in page and "o-1" in page
    assert '<button type="submit">Retry</button>' in page
    assert '<button type="submit">Resolve</button>' in page


def test_it_renders_script_in_args_as_text(
    support: Any, agent_a: Any, console_catalog: Any
) -> None:
    ticket = dead_letter(
        agent_a[0],
        "r-xss",
        args={"order_id": "<script>alert(1)</script>"},
        error="<img src=x onerror=alert(2)>",
    )

    page = logged_in(support).get(f"/console/tickets/{ticket.pk}/").content.decode()

    assert "<script>alert(1)</script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<img src=x" not in page


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("get", "/console/tickets/"),
        ("get", "/console/tickets/{pk}/"),
        ("post", "/console/tickets/{pk}/assign/"),
        ("post", "/console/tickets/{pk}/retry/"),
        ("post", "/console/tickets/{pk}/resolve/"),
        ("post", "/console/tickets/{pk}/comment/"),
        ("post", "/console/tickets/bulk/"),
    ],
)
def test_it_forbids_a_reviewer(reviewer: Any, ticket: Ticket, method: str, path: str) -> None:
    client = logged_in(reviewer)
    data = {"to": "me", "note": "n", "text": "t", "action": "retry", "ids": [ticket.pk]}

    response = getattr(client, method)(path.format(pk=ticket.pk), data)

    assert response.status_code == 403
    ticket.refresh_from_db()
    assert (ticket.status, ticket.assignee_id) == ("open", None)
    assert ticket.compensation.status == "dead_lettered"
    assert [kind for kind, *_ in actions(ticket)] == ["opened"]


def test_it_lets_a_superuser_work_the_desk(superuser: Any, ticket: Ticket) -> None:
    response = logged_in(superuser).post(f"/console/tickets/{ticket.pk}/assign/", {"to": "me"})

    assert response.status_code == 302
    ticket.refresh_from_db()
    assert ticket.assignee == superuser


def test_it_refuses_a_post_without_csrf_token(support: Any, ticket: Ticket) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(support)

    response = client.post(f"/console/tickets/{ticket.pk}/resolve/", {"note": "done by hand"})

    assert response.status_code == 403
    ticket.refresh_from_db()
    assert ticket.status == "open"
    assert ticket.compensation.status == "dead_lettered"


def test_it_assigns_and_unassigns_audited(support: Any, ticket: Ticket) -> None:
    client = logged_in(support)

    client.post(f"/console/tickets/{ticket.pk}/assign/", {"to": "me"})
    ticket.refresh_from_db()
    assert ticket.assignee == support
    client.post(f"/console/tickets/{ticket.pk}/assign/", {"to": "nobody"})
    ticket.refresh_from_db()
    assert ticket.assignee is None

    assert actions(ticket)[1:] == [("assigned", "sam", "to sam"), ("unassigned", "sam", "")]


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        ({"to": "mallory"}, "Assign to whom? Choose “me”, “nobody” or a person."),
        ({"to": "user", "user": "mallory"}, "There is no user “mallory”"),
        ({"to": "user", "user": " "}, "Choose whom to assign it to."),
        ({"to": "user", "user": "rita"}, "rita cannot work tickets"),
    ],
)
def test_it_refuses_an_assignment_to_someone_unknown_or_not_support(
    support: Any, reviewer: Any, ticket: Ticket, data: dict[str, str], problem: str
) -> None:
    response = logged_in(support).post(f"/console/tickets/{ticket.pk}/assign/", data, follow=True)

    assert f"Not assigned: {problem}" in response.content.decode()
    ticket.refresh_from_db()
    assert ticket.assignee is None
    assert [kind for kind, *_ in actions(ticket)] == ["opened"]


def test_it_resolves_with_a_note_and_ends_the_run_aborted(support: Any, ticket: Ticket) -> None:
    response = logged_in(support).post(
        f"/console/tickets/{ticket.pk}/resolve/",
        {"note": "Cancelled o-1 in the orders admin."},
        follow=True,
    )

    assert "Resolved by hand" in response.content.decode()
    ticket.refresh_from_db()
    assert ticket.status == "closed"
    assert ticket.compensation.status == "resolved"
    assert Run.objects.get(pk=ticket.run_id).status == "aborted"
    assert actions(ticket)[-1] == ("resolved", "sam", "Cancelled o-1 in the orders admin.")


@pytest.mark.parametrize("note", ["", "   "])
def test_it_refuses_to_resolve_without_a_note(support: Any, ticket: Ticket, note: str) -> None:
    response = logged_in(support).post(f"/console/tickets/{ticket.pk}/resolve/", {"note": note})

    assert response.status_code == 400
    assert "A note is required" in response.content.decode()
    ticket.refresh_from_db()
    assert ticket.status == "open"
    assert ticket.compensation.status == "dead_lettered"
    assert Run.objects.get(pk=ticket.run_id).status == "compensation_failed"


def test_it_refuses_to_resolve_a_closed_ticket(support: Any, ticket: Ticket) -> None:
    client = logged_in(support)
    client.post(f"/console/tickets/{ticket.pk}/resolve/", {"note": "first"})

    response = client.post(
        f"/console/tickets/{ticket.pk}/resolve/", {"note": "second"}, follow=True
    )

    assert "already closed" in response.content.decode()
    assert [e for e in actions(ticket) if e[0] == "resolved"] == [("resolved", "sam", "first")]


def test_it_queues_a_retry_and_reopens_the_run(
    support: Any, ticket: Ticket, django_capture_on_commit_callbacks: Any
) -> None:
    from unittest.mock import patch

    IdempotencyRecord.objects.create(
        key=ticket.compensation.key,
        call_ref="c-x",
        tool="cancel_order",
        state="recorded",
        lease_until="2026-01-01T00:00:00Z",
        expires_at="2099-01-01T00:00:00Z",
    )
    with (
        patch("compensations.tasks.compensate_run.delay", autospec=True) as delay,
        django_capture_on_commit_callbacks(execute=True),
    ):
        response = logged_in(support).post(f"/console/tickets/{ticket.pk}/retry/", follow=True)

    assert "Retry queued" in response.content.decode()
    delay.assert_called_once_with(ticket.run_id)
    compensation = Compensation.objects.get(pk=ticket.compensation_id)
    assert compensation.status == "pending"
    # The next round claims the same key anew: the failed round's record is gone.
    assert not IdempotencyRecord.objects.filter(key=compensation.key).exists()
    assert Run.objects.get(pk=ticket.run_id).status == "aborting"
    assert actions(ticket)[-1] == ("retried", "sam", "")


def test_it_refuses_a_second_retry_while_one_runs(support: Any, ticket: Ticket) -> None:
    client = logged_in(support)
    client.post(f"/console/tickets/{ticket.pk}/retry/")

    response = client.post(f"/console/tickets/{ticket.pk}/retry/", follow=True)

    assert "already running" in response.content.decode()
    assert [e[0] for e in actions(ticket)].count("retried") == 1


def test_it_adds_comments_and_refuses_empty_ones(support: Any, ticket: Ticket) -> None:
    client = logged_in(support)

    client.post(f"/console/tickets/{ticket.pk}/comment/", {"text": "Asked payments on-call."})
    empty = client.post(f"/console/tickets/{ticket.pk}/comment/", {"text": "  "})

    assert empty.status_code == 400
    assert "A comment cannot be empty" in empty.content.decode()
    assert [e for e in actions(ticket) if e[0] == "comment"] == [
        ("comment", "sam", "Asked payments on-call.")
    ]
    page = client.get(f"/console/tickets/{ticket.pk}/").content.decode()
    assert "Asked payments on-call." in page


def test_it_bulk_assigns_and_retries(support: Any, agent_a: Any) -> None:
    one, two = dead_letter(agent_a[0], "r-b1"), dead_letter(agent_a[0], "r-b2")
    client = logged_in(support)

    client.post("/console/tickets/bulk/", {"action": "assign", "ids": [one.pk, two.pk]})
    response = client.post(
        "/console/tickets/bulk/", {"action": "retry", "ids": [one.pk, two.pk], "query": "tool=x"}
    )

    assert response["Location"] == "/console/tickets/?tool=x"
    for ticket in (one, two):
        ticket.refresh_from_db()
        assert ticket.assignee == support
        assert ticket.compensation.status == "pending"


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        ({"action": "retry"}, "Select at least one ticket"),
        ({"action": "explode", "ids": ["1"]}, "Select a valid choice"),
        ({"action": "retry", "ids": ["999999"]}, "Select a valid choice"),
        ({"action": "retry", "ids": ["abc"]}, "Select a valid choice"),
    ],
)
def test_it_refuses_bad_bulk_input(support: Any, ticket: Ticket, data: dict, problem: str) -> None:
    response = logged_in(support).post("/console/tickets/bulk/", data, follow=True)

    assert "Nothing was done" in response.content.decode()
    assert problem in response.content.decode()
    ticket.refresh_from_db()
    assert ticket.compensation.status == "dead_lettered"
    assert ticket.assignee is None


def test_it_refuses_a_retry_that_could_only_fail_or_resend_blindly(
    support: Any, agent_a: Any
) -> None:
    unmappable = dead_letter(agent_a[0], "r-unmappable")
    Compensation.objects.filter(pk=unmappable.compensation_id).update(
        problem="create_order succeeded but its undo cannot be built: $.result.x not found"
    )
    unknown = dead_letter(agent_a[0], "r-unknown")
    ToolCall.objects.filter(pk=unknown.compensation.undo_call_id).update(status="unknown")
    client = logged_in(support)

    first = client.post(f"/console/tickets/{unmappable.pk}/retry/", follow=True)
    second = client.post(f"/console/tickets/{unknown.pk}/retry/", follow=True)

    assert "cannot be built from the call" in first.content.decode()
    assert "its outcome is unknown" in second.content.decode()
    for ticket in (unmappable, unknown):
        assert Compensation.objects.get(pk=ticket.compensation_id).status == "dead_lettered"
        assert Run.objects.get(pk=ticket.run_id).status == "compensation_failed"
