"""Cross-site scripting through every field that a model, an agent or a downstream
controls: the console renders them for reviewers and operators, whose sessions approve
charges. Each field holds markup that would run if it were inserted as HTML; every page
(and its htmx fragment) that shows the field must show it as text only.

The markers (`xss-<field>`) prove the field was rendered on the page at all, so that a
page that stops showing a field does not pass for a safe one."""

# The console's personas are imported as fixtures, so test arguments shadow them.
# ruff: noqa: F811

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from compensations.models import TicketEvent
from tests.compensations.conftest import dead_letter
from tests.conftest import Shop
from tests.console.conftest import CONSOLE_CATALOG, fast_password_hashing  # noqa: F401
from tests.security.conftest import hold, make_call, make_run
from tests.toolops.api.helpers import body, create_run, post_call
from toolops.approvals.models import Approval, ApprovalVote
from toolops.models import Agent, Run
from toolops.tools import registry

pytestmark = pytest.mark.django_db


def payload(field: str) -> str:
    """Markup that runs if inserted as HTML: as an element, and breaking out of a quoted
    attribute."""
    return f'<script>alert(1)</script>"><img src=x onerror=alert(1)>xss-{field}'


LIVE = ("<script>alert(1)", "<img src=x", '"><img')


def assert_only_escaped(html: str, *fields: str) -> None:
    for live in LIVE:
        assert live not in html, f"live markup {live!r} in the page"
    for field in fields:
        assert f"xss-{field}" in html, f"{field} is not shown on this page"
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html or not fields


@pytest.fixture
def xss_catalog(settings: Any, tmp_path: Path) -> Iterator[None]:
    # A tool description is free text in the catalog; JSON strings are TOML strings.
    text = CONSOLE_CATALOG.replace(
        '"Create an order."', json.dumps(payload("description"))
    ).replace('"Send a message to the customer."', json.dumps(payload("description")))
    path = tmp_path / "catalog.toml"
    path.write_text(text)
    settings.TOOLOPS_TOOLS_FILE = str(path)
    settings.TOOLOPS_POLICY_CACHE_S = 0
    registry.reset()
    yield
    registry.reset()


@pytest.fixture
def hostile(xss_catalog: None, django_user_model: Any) -> dict[str, Any]:
    """Every field a hostile agent, downstream or account name could fill, filled."""
    boss = django_user_model.objects.create_superuser(
        username=payload("username")[:150], email="b@example.com", password="pw"
    )
    agent = Agent.objects.create(name=payload("agent"), token_hash="f" * 64, token_hint="tops_x")
    run = make_run(
        agent, "r-xss", session_key=payload("session_key"), metadata={"note": payload("metadata")}
    )
    call = make_call(
        run,
        payload("tool_call_id")[:128],
        0,
        "create_order",
        "failed",
        args={"note": payload("args")},
        result={"note": payload("result")},
        error_class="fatal",
        error_reason="rejected",
        error_message=payload("error"),
        feedback=payload("feedback"),
    )
    unknown_tool = make_call(
        run,
        "tc-made-up",
        1,
        payload("tool_name")[:128],
        "failed",
        error_class="fatal",
        error_reason="unknown_tool",
    )
    unknown = make_call(
        run,
        "tc-lost",
        2,
        "create_order",
        "unknown",
        args={"note": payload("args")},
        error_class="unknown",
        error_reason="timeout",
        error_message=payload("unknown_error"),
        created_at=timezone.now() - timedelta(minutes=10),
    )
    pending = hold(
        run, "tc-held", "send_notification", {"to": "c-1", "message": payload("args")}, step_index=4
    )
    decided = hold(
        run, "tc-decided", "send_notification", {"to": "c-1", "message": "hi"}, step_index=5
    )
    ApprovalVote.objects.create(
        approval=decided,
        reviewer=boss,
        decision="reject",
        note=payload("reviewer_note"),
        args_hash=decided.args_hash,
    )
    Approval.objects.filter(pk=decided.pk).update(
        status="rejected", decided_by=boss, decided_at=timezone.now(), note=payload("reviewer_note")
    )
    ticket = dead_letter(agent, "r-xss-dead", error=payload("downstream_error"))
    TicketEvent.objects.create(
        ticket=ticket, kind="comment", actor=boss, text=payload("ticket_comment")
    )
    ticket.assignee = boss
    ticket.save(update_fields=["assignee"])
    client = Client()
    client.force_login(boss)
    return {
        "client": client,
        "run": run,
        "call": call,
        "unknown": unknown,
        "pending": pending,
        "decided": decided,
        "ticket": ticket,
        "unknown_tool": unknown_tool,
    }


def page(hostile: dict[str, Any], path: str, *, htmx: bool = False, **params: Any) -> str:
    headers = {"HX-Request": "true"} if htmx else {}
    response = hostile["client"].get(path, params, headers=headers, follow=True)
    assert response.status_code == 200, (path, response.status_code)
    return response.content.decode()


def test_the_run_list_shows_agent_names_and_usernames_only_as_text(hostile: Any) -> None:
    assert_only_escaped(page(hostile, "/console/runs/"), "agent", "username")


def test_the_run_list_fragment_escapes_them_too(hostile: Any) -> None:
    assert_only_escaped(page(hostile, "/console/runs/", htmx=True), "agent")


def test_a_search_reflects_the_query_only_as_text(hostile: Any) -> None:
    html = page(hostile, "/console/runs/", q=payload("query"))
    assert_only_escaped(html, "query")
    assert_only_escaped(page(hostile, "/console/search/", q=payload("search")))


def test_the_run_page_shows_args_results_errors_feedback_and_session_only_as_text(
    hostile: Any,
) -> None:
    html = page(hostile, f"/console/runs/{hostile['run'].pk}/")
    assert_only_escaped(
        html,
        "session_key",
        "args",
        "result",
        "error",
        "feedback",
        "tool_call_id",
        "tool_name",
        "agent",
    )


def test_the_run_pages_live_fragment_escapes_them_too(hostile: Any) -> None:
    html = page(hostile, f"/console/runs/{hostile['run'].pk}/", htmx=True)
    assert_only_escaped(html, "args", "result", "error", "feedback")


def test_a_calls_full_args_page_shows_them_only_as_text(hostile: Any) -> None:
    html = page(hostile, f"/console/calls/{hostile['call'].call_id}/args/")
    assert_only_escaped(html, "args", "result")


def test_the_approval_queue_shows_the_held_call_only_as_text(hostile: Any) -> None:
    assert_only_escaped(page(hostile, "/console/approvals/"), "agent")
    assert_only_escaped(page(hostile, "/console/approvals/", htmx=True), "agent")


def test_a_pending_approval_shows_full_args_and_description_only_as_text(hostile: Any) -> None:
    html = page(hostile, f"/console/approvals/{hostile['pending'].approval_id}/")
    assert_only_escaped(html, "args", "agent")


def test_a_decided_approval_shows_the_reviewers_note_and_name_only_as_text(
    hostile: Any,
) -> None:
    html = page(hostile, f"/console/approvals/{hostile['decided'].approval_id}/")
    assert_only_escaped(html, "reviewer_note", "username")
    fragment = page(hostile, f"/console/approvals/{hostile['decided'].approval_id}/", htmx=True)
    assert_only_escaped(fragment, "reviewer_note")


def test_the_support_desk_shows_tickets_only_as_text(hostile: Any) -> None:
    assert_only_escaped(page(hostile, "/console/tickets/"), "username")
    assert_only_escaped(page(hostile, "/console/tickets/", htmx=True))


def test_a_ticket_shows_comments_downstream_errors_and_assignee_only_as_text(
    hostile: Any,
) -> None:
    html = page(hostile, f"/console/tickets/{hostile['ticket'].pk}/")
    assert_only_escaped(html, "ticket_comment", "downstream_error", "username")


def test_unknown_outcomes_show_the_downstreams_error_only_as_text(hostile: Any) -> None:
    assert_only_escaped(page(hostile, "/console/unknown/"), "unknown_error")
    html = page(hostile, f"/console/unknown/{hostile['unknown'].pk}/settle/")
    assert_only_escaped(html, "unknown_error", "args")


def test_the_tool_pages_show_catalog_descriptions_only_as_text(hostile: Any) -> None:
    assert_only_escaped(page(hostile, "/console/tools/"), "description")
    assert_only_escaped(page(hostile, "/console/tools/create_order/policy/"))
    assert_only_escaped(page(hostile, "/console/health/"))
    assert_only_escaped(page(hostile, "/console/metrics/"))


def test_the_api_answers_only_json_that_a_browser_will_not_sniff_as_html(
    api: Any, shop: Shop
) -> None:
    # A result or error from a downstream reaches the agent inside JSON, marked so and
    # not to be sniffed as HTML by a browser that is sent to the URL.
    create_run(api, metadata={"note": payload("metadata")})
    response = post_call(api, step_index=0, tool="reserve_stock", args={"sku": "A12", "qty": 1})
    run = api.get("/api/v1/runs/r-1")

    for answer in (response, run):
        assert answer["Content-Type"] == "application/json"
        assert answer["X-Content-Type-Options"] == "nosniff"
    assert body(run)["run_id"] == "r-1"


def test_live_updates_push_ids_never_markup(hostile: Any) -> None:
    # The WebSocket tells a page that something changed and the page re-fetches it through
    # the escaping views above: no pushed message carries a field's text (consumers.py).
    from toolops.live import Changed

    assert set(Changed.__annotations__) == {"type", "item"}
    assert Run.objects.filter(pk=hostile["run"].pk).exists()
