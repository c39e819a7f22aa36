"""The reviewer queue and an approval's page (API.md: an approval's `url` shows the
call's tool_call_id and run_id and has buttons named "Approve" and "Reject"): who may
use them, what each decision changes, and refused decisions that change nothing."""

# The console's personas are imported as fixtures, so test arguments shadow them.
# ruff: noqa: F811

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from types import SimpleNamespace
from typing import Any
from unittest.mock import patch

import pytest
from asgiref.testing import ApplicationCommunicator
from django.contrib.messages import get_messages
from django.test import Client
from django.utils import timezone

from tests.console.conftest import (  # noqa: F401 - fixtures shared with the console tests
    console_catalog,
    fast_password_hashing,
    logged_in,
    make_call,
    make_run,
    operator,
    outsider,
    reviewer,
    superuser,
    support,
)
from toolops.approvals.models import Approval, ApprovalVote
from toolops.approvals.wording import describe
from toolops.models import Agent, Run, ToolCall

pytestmark = pytest.mark.django_db

ORDER = {"sku": "A12", "qty": 1, "amount": "199.00"}


def hold(
    run: Run,
    tool_call_id: str,
    tool: str = "create_order",
    args: dict[str, Any] | None = None,
    *,
    step_index: int = 3,
    reason: str = "irreversible",
    duplicate_of: ToolCall | None = None,
    required: int = 1,
    age_s: int = 0,
    ttl_s: int = 1800,
) -> Approval:
    """A call held for a reviewer, built as the executor's gate leaves it."""
    held_at = timezone.now() - timedelta(seconds=age_s)
    call = make_call(
        run,
        tool_call_id,
        step_index,
        tool,
        "pending_approval",
        args=args or ORDER,
        args_digest=f"digest-{tool_call_id}",
        created_at=held_at,
    )
    approval = Approval.objects.create(
        run=run,
        tool=tool,
        reason=reason,
        duplicate_of=duplicate_of,
        args_hash=call.args_digest,
        approvals_required=required,
        created_at=held_at,
        expires_at=held_at + timedelta(seconds=ttl_s),
    )
    call.approval = approval
    call.save(update_fields=["approval"])
    return approval


def url(approval: Approval, action: str = "") -> str:
    return f"/console/approvals/{approval.approval_id}/{action}"


def decide(client: Client, approval: Approval, decision: str, note: str = "", **extra: Any) -> Any:
    data = {"decision": decision, "note": note, "args_hash": approval.args_hash, **extra}
    return client.post(url(approval, "decide/"), data)


def said(response: Any) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]


@pytest.fixture
def run(agent_a: tuple[Agent, str]) -> Run:
    return make_run(agent_a[0], "r-118")


@pytest.fixture
def approval(run: Run, console_catalog: Any) -> Approval:
    return hold(run, "tc-77")


# -- the queue ---------------------------------------------------------------------------


def test_it_lists_pending_approvals_oldest_first(
    reviewer: Any, run: Run, agent_b: Any, console_catalog: Any
) -> None:
    older = hold(run, "tc-old", age_s=600)
    newer = hold(
        make_run(agent_b[0], "r-b"),
        "tc-new",
        "send_notification",
        {"to": "ann@example.com", "message": "hi"},
        reason="policy",
    )
    decided = hold(run, "tc-done", step_index=4, age_s=900)
    Approval.objects.filter(pk=decided.pk).update(status="approved")

    response = logged_in(reviewer).get("/console/approvals/")

    assert response.status_code == 200
    page = response.content.decode()
    assert page.index("tc-old") < page.index("tc-new")
    assert "tc-done" not in page
    assert f'href="/console/approvals/{older.approval_id}/"' in page
    assert f'href="/console/approvals/{newer.approval_id}/"' in page
    assert "Create an order for 1 × A12 at 199.00" in page
    # E-mail addresses are redacted wherever args are shown (docs/sensitive-data.md).
    assert "Send a message to [redacted email]" in page
    assert "<code>r-118</code>" in page and "agent-b" in page
    assert 'class="badge count-pending">2<' in page
    assert ">10 min</time>" in page  # waiting
    assert ">19 min</time>" in page  # time left of its 30
    assert "<kbd>j</kbd>" in page
    # With no shared channel layer the table polls for changes.
    assert 'hx-trigger="every 3s"' in page


def test_it_filters_by_tool_agent_and_reason(
    reviewer: Any, run: Run, agent_a: Any, agent_b: Any, console_catalog: Any
) -> None:
    hold(run, "tc-order")
    hold(make_run(agent_b[0], "r-b"), "tc-note", "send_notification", {"to": "x"}, reason="policy")
    client = logged_in(reviewer)

    def shown(query: str) -> set[str]:
        page = client.get(f"/console/approvals/?{query}").content.decode()
        return {c for c in ("tc-order", "tc-note") if f"<code>{c}</code>" in page}

    assert shown("") == {"tc-order", "tc-note"}
    assert shown("tool=send_notification") == {"tc-note"}
    assert shown(f"agent={agent_a[0].pk}") == {"tc-order"}
    assert shown("reason=policy") == {"tc-note"}
    assert shown("reason=possible_duplicate") == set()
    # An invalid filter value is ignored, not an error page.
    assert shown("reason=bogus&agent=x") == {"tc-order", "tc-note"}


def test_it_answers_htmx_with_the_table_alone(reviewer: Any, approval: Approval) -> None:
    response = logged_in(reviewer).get("/console/approvals/", headers={"HX-Request": "true"})

    page = response.content.decode()
    assert page.lstrip().startswith('<div id="approval-table"')
    assert "tc-77" in page and "<nav" not in page


def test_it_pushes_instead_of_polling_with_a_shared_layer(
    reviewer: Any, approval: Approval, settings: Any
) -> None:
    settings.REDIS_URL = "redis://127.0.0.1:1/0"  # only read as "set" by the page
    client = logged_in(reviewer)

    for path in ("/console/approvals/", url(approval)):
        page = client.get(path).content.decode()
        assert 'data-push="/ws/approvals/"' in page
        assert 'hx-trigger="live-changed from:body"' in page


def test_it_shows_approvals_in_the_nav_to_reviewers_only(
    reviewer: Any, support: Any, approval: Approval
) -> None:
    page = logged_in(reviewer).get("/console/").content.decode()
    assert 'href="/console/approvals/"' in page
    assert 'class="badge count approvals-count" title="1 approval waiting">1<' in page

    assert 'href="/console/approvals/"' not in logged_in(support).get("/console/").content.decode()


# session, user, the user's groups, the nav's three counts, the approvals with their calls,
# runs and agents, the counts, the tabs' counts, the agents for the filter.
QUEUE_QUERIES = 10


@pytest.mark.parametrize("count", [1, 6])
def test_it_lists_the_queue_in_constant_queries(
    reviewer: Any, run: Run, console_catalog: Any, django_assert_num_queries: Any, count: int
) -> None:
    for i in range(count):
        hold(run, f"tc-{i}", step_index=i)
    client = logged_in(reviewer)

    with django_assert_num_queries(QUEUE_QUERIES):
        response = client.get("/console/approvals/")

    assert response.content.decode().count('class="approval-row') == count


# -- an approval's page ----------------------------------------------------------------------


def test_it_shows_the_call_in_plain_words_with_ids_and_buttons(
    reviewer: Any, run: Run, approval: Approval
) -> None:
    make_call(
        run,
        "tc-75",
        1,
        "query_stock",
        "succeeded",
        args={"sku": "A12"},
        result={"sku": "A12", "in_stock": 4},
    )
    make_call(
        run,
        "tc-76",
        2,
        "reserve_stock",
        "failed",
        args={"sku": "A12", "qty": 1},
        error_message="warehouse said no",
    )
    make_call(
        run,
        "tc-later",
        5,
        "query_stock",
        "succeeded",
        args={"sku": "B7"},
        created_at=timezone.now() + timedelta(seconds=5),
    )

    response = logged_in(reviewer).get(f"/console/approvals/{approval.approval_id}/")

    assert response.status_code == 200
    page = response.content.decode()
    assert '<code class="tool-call-id">tc-77</code>' in page
    assert '<code class="run-id">r-118</code>' in page
    assert "Create an order for 1 × A12 at 199.00" in page
    assert "agent-a" in page
    # create_order declares cancel_order: held as "irreversible", it is not said to be
    # beyond undoing.
    assert "cannot be undone" not in page
    assert "Approve runs create_order now." in page
    assert "Only cancel_order can undo create_order" in page
    assert "0 of 1 approval" in page
    assert "min left" in page
    assert 'name="decision" value="approve" class="primary approve">Approve</button>' in page
    assert 'name="decision" value="reject" class="reject">Reject</button>' in page
    assert f'name="args_hash" value="{approval.args_hash}"' in page
    assert "<kbd>a</kbd>" in page
    # The args, pretty: one field per line.
    assert "&quot;amount&quot;: &quot;199.00&quot;" in page
    # Earlier steps with their outcomes; a later one is not earlier.
    earlier = page[page.index("Earlier in this conversation") :]
    assert earlier.index("tc-75") < earlier.index("tc-76")
    assert "&quot;in_stock&quot;: 4" in earlier
    assert "warehouse said no" in earlier
    assert "tc-later" not in page
    # The note is outside the polled region: a refresh never wipes what is being typed.
    live = page[page.index('id="approval-live"') : page.index('class="card decide"')]
    assert "textarea" not in live and 'hx-trigger="every 3s"' in live


# session, user, the user's groups, the approval with its call, run, agent, duplicate and
# decider, its votes, the earlier steps, the nav's three counts. Nothing is audited: the
# page shows the held call redacted, and its full args are a page of their own.
PAGE_QUERIES = 9


@pytest.mark.parametrize("count", [1, 6])
def test_it_shows_the_page_in_constant_queries(
    reviewer: Any,
    superuser: Any,
    run: Run,
    console_catalog: Any,
    django_assert_num_queries: Any,
    count: int,
) -> None:
    for i in range(count):
        make_call(run, f"tc-{i}", i, "query_stock", "succeeded", result={"n": i})
    approval = hold(run, "tc-held", step_index=count, required=2)
    decide(logged_in(superuser), approval, "approve")
    client = logged_in(reviewer)

    with django_assert_num_queries(PAGE_QUERIES):
        page = client.get(url(approval)).content.decode()

    assert "1 of 2 approvals: admin" in page
    assert page.count('class="earlier-step"') == count


def test_it_shows_a_possible_duplicate_side_by_side(
    reviewer: Any, agent_a: Any, run: Run, console_catalog: Any
) -> None:
    earlier_run = make_run(agent_a[0], "r-117", session_key="s-1")
    first = make_call(
        earlier_run,
        "tc-first",
        3,
        "create_order",
        "succeeded",
        args=ORDER,
        result={"order_id": "ord-9"},
    )
    approval = hold(run, "tc-again", reason="possible_duplicate", duplicate_of=first)

    page = logged_in(reviewer).get(url(approval)).content.decode()

    # Facts first, before the Decide box; the raw JSON under Technical details.
    compared = page[page.index('class="card duplicate-compare"') :]
    assert page.index('class="card duplicate-compare"') < page.index('class="card decide"')
    assert '<th scope="col">This call</th><th scope="col">Already done</th>' in compared
    assert "Already done: succeeded, just now in run r-117." in compared
    technical = page[page.index('<details class="card technical"') :]
    assert '<code class="duplicate-run-id">r-117</code>' in technical
    assert '<code class="duplicate-tool-call-id">tc-first</code>' in technical
    assert "&quot;order_id&quot;: &quot;ord-9&quot;" in technical
    assert 'class="badge s-succeeded">succeeded<' in technical
    assert "another run of this session" in page


def test_it_renders_script_in_args_as_text(reviewer: Any, run: Run, console_catalog: Any) -> None:
    args = {"sku": "<script>alert(1)</script>", "qty": 1, "password": "hunter2"}
    approval = hold(run, "tc-x", "create_order", args)

    for path in ("/console/approvals/", url(approval)):
        page = logged_in(reviewer).get(path).content.decode()
        assert "<script>alert(1)</script>" not in page
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
        # Redacted on both: the full args are a page of their own, each look audited.
        assert "hunter2" not in page


def test_it_answers_404_for_an_unknown_approval(reviewer: Any, approval: Approval) -> None:
    client = logged_in(reviewer)

    assert client.get("/console/approvals/ap-nope/").status_code == 404
    assert decide(client, approval, "approve").status_code != 404  # the real one exists
    assert client.post("/console/approvals/ap-nope/decide/", {}).status_code == 404


# -- deciding -----------------------------------------------------------------------------------


def test_it_approves_and_the_worker_runs_the_call(
    reviewer: Any, approval: Approval, django_capture_on_commit_callbacks: Any
) -> None:
    with (
        patch("toolops.tasks.execute_approved_call.delay", autospec=True) as delay,
        django_capture_on_commit_callbacks(execute=True),
    ):
        response = decide(logged_in(reviewer), approval, "approve")

    assert response.status_code == 302
    assert response["Location"] == "/console/approvals/"  # nothing else waits
    approval.refresh_from_db()
    assert approval.status == "approved"
    assert approval.decided_by == reviewer
    assert ToolCall.objects.get(approval=approval).status == "in_progress"
    delay.assert_called_once_with(approval.pk)
    assert said(response) == [
        "Approved “Create an order for 1 × A12 at 199.00” (tc-77 in run r-118): the worker "
        "runs it now. Nothing else waits for you."
    ]


def test_it_goes_on_to_the_next_pending_approval(
    reviewer: Any, run: Run, approval: Approval
) -> None:
    following = hold(run, "tc-78", step_index=4)

    with patch("toolops.tasks.execute_approved_call.delay", autospec=True):
        response = decide(logged_in(reviewer), approval, "approve")

    assert response["Location"] == f"{url(following)}?after={approval.approval_id}"


def test_it_refuses_to_reject_without_a_note_and_changes_nothing(
    reviewer: Any, approval: Approval
) -> None:
    response = decide(logged_in(reviewer), approval, "reject", note="   ")

    assert response.status_code == 302
    assert response["Location"] == url(approval)
    assert said(response) == ["A note is required to reject: tell the agent why."]
    approval.refresh_from_db()
    assert approval.status == "pending"
    assert not ApprovalVote.objects.exists()
    assert ToolCall.objects.get(approval=approval).status == "pending_approval"


def test_it_rejects_with_a_note(reviewer: Any, approval: Approval) -> None:
    with patch("toolops.tasks.execute_approved_call.delay", autospec=True) as delay:
        response = decide(logged_in(reviewer), approval, "reject", note="Wrong customer.")

    assert response["Location"] == "/console/approvals/"
    assert said(response)[0].startswith("Rejected “Create an order for 1 × A12 at 199.00”")
    approval.refresh_from_db()
    assert (approval.status, approval.note, approval.decided_by) == (
        "rejected",
        "Wrong customer.",
        reviewer,
    )
    call = ToolCall.objects.get(approval=approval)
    assert (call.status, call.error_reason) == ("rejected", "rejected")
    delay.assert_not_called()


def test_it_refuses_a_second_decision_naming_who_decided(
    reviewer: Any, superuser: Any, approval: Approval
) -> None:
    with patch("toolops.tasks.execute_approved_call.delay", autospec=True):
        decide(logged_in(reviewer), approval, "approve")

    response = decide(logged_in(superuser), approval, "reject", note="too late")

    assert response["Location"] == url(approval)
    assert said(response)[0].startswith("Already decided: approved by rita")
    approval.refresh_from_db()
    assert approval.status == "approved"
    assert ApprovalVote.objects.filter(approval=approval).count() == 1
    page = logged_in(superuser).get(url(approval)).content.decode()
    assert "by <strong>rita</strong>" in page
    assert ">Approve</button>" not in page  # decided: no form


def test_it_refuses_a_decision_on_other_args(reviewer: Any, approval: Approval) -> None:
    response = decide(logged_in(reviewer), approval, "approve", args_hash="stale")

    assert "not the ones you were shown" in said(response)[0]
    approval.refresh_from_db()
    assert approval.status == "pending"


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        ({"decision": "maybe", "args_hash": "x"}, "Choose Approve or Reject."),
        ({"decision": "approve"}, "reload it"),
    ],
)
def test_it_refuses_bad_input(reviewer: Any, approval: Approval, data: dict, problem: str) -> None:
    response = logged_in(reviewer).post(url(approval, "decide/"), data)

    assert response["Location"] == url(approval)
    assert problem in said(response)[0]
    approval.refresh_from_db()
    assert approval.status == "pending"


def test_it_needs_two_distinct_reviewers_where_required(
    reviewer: Any, superuser: Any, run: Run, console_catalog: Any
) -> None:
    approval = hold(run, "tc-2", required=2)
    client = logged_in(reviewer)

    first = decide(client, approval, "approve")

    assert "1 of 2 approvals; it waits for another reviewer" in said(first)[0]
    assert "1 of 2 approvals: rita" in client.get(url(approval)).content.decode()
    again = decide(client, approval, "approve")
    assert "already decided on this call (approve)" in said(again)[0]
    with patch("toolops.tasks.execute_approved_call.delay", autospec=True):
        decide(logged_in(superuser), approval, "approve")
    approval.refresh_from_db()
    assert approval.status == "approved"


# -- access ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("persona", ["outsider", "support", "operator"])
def test_it_forbids_everyone_but_reviewers(
    persona: str, request: pytest.FixtureRequest, approval: Approval
) -> None:
    client = logged_in(request.getfixturevalue(persona))

    assert client.get("/console/approvals/").status_code == 403
    assert client.get(url(approval)).status_code == 403
    assert decide(client, approval, "approve").status_code == 403
    approval.refresh_from_db()
    assert approval.status == "pending"


def test_it_sends_anonymous_users_to_the_login_page(approval: Approval) -> None:
    response = Client().get("/console/approvals/")

    assert response.status_code == 302
    assert "/console/login/" in response["Location"]


def test_it_lets_a_superuser_review(superuser: Any, approval: Approval) -> None:
    client = logged_in(superuser)

    assert client.get("/console/approvals/").status_code == 200
    assert client.get(url(approval)).status_code == 200
    with patch("toolops.tasks.execute_approved_call.delay", autospec=True):
        decide(client, approval, "approve")
    approval.refresh_from_db()
    assert approval.status == "approved"


def test_it_refuses_a_post_without_csrf_token(reviewer: Any, approval: Approval) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(reviewer)

    response = decide(client, approval, "approve")

    assert response.status_code == 403
    approval.refresh_from_db()
    assert approval.status == "pending"


@pytest.mark.django_db(transaction=True)
def test_reviewers_receive_pushes_and_others_are_refused(reviewer: Any, support: Any) -> None:
    from channels.layers import get_channel_layer

    from toolops.approvals.consumers import ApprovalsConsumer
    from toolops.approvals.services import LIVE_GROUP

    async def connect(user: Any) -> tuple[ApplicationCommunicator, bool]:
        scope = {
            "type": "websocket",
            "path": "/ws/approvals/",
            "headers": [],
            "subprotocols": [],
            "user": user,
        }
        communicator = ApplicationCommunicator(ApprovalsConsumer.as_asgi(), scope)
        await communicator.send_input({"type": "websocket.connect"})
        answer = await communicator.receive_output(timeout=2)
        return communicator, answer["type"] == "websocket.accept"

    async def scenario() -> None:
        queue, ok = await connect(reviewer)
        assert ok
        _, refused = await connect(support)
        assert not refused
        await get_channel_layer().group_send(LIVE_GROUP, {"type": "live.changed", "item": 7})
        sent = await queue.receive_output(timeout=2)
        assert json.loads(sent["text"]) == {"type": "live.changed", "group": "approvals", "item": 7}
        await queue.send_input({"type": "websocket.disconnect", "code": 1000})
        await queue.wait(timeout=2)

    asyncio.run(scenario())


# -- plain words ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tool", "args", "words"),
    [
        ("charge", {"order_id": "ord-9", "amount": "199.00"}, "Charge 199.00 for order ord-9"),
        ("create_order", ORDER, "Create an order for 1 × A12 at 199.00"),
        (
            "send_notification",
            {"to": "ann@example.com", "message": "hi"},
            "Send a message to [redacted email]",
        ),
        ("reserve_stock", {"sku": "A12", "qty": 2}, "reserve_stock with sku=A12, qty=2"),
        ("bulk", {"a": 1, "b": [1, 2], "c": "x", "d": 4}, "bulk with a=1, b=[1,2], c=x, …"),
        ("login", {"user": "u", "password": "hunter2"}, "login with user=u, password=[redacted]"),
        ("ping", {}, "ping with no args"),
        ("charge", {"order_id": "ord-9"}, "charge with order_id=ord-9"),
    ],
)
def test_it_describes_a_call_in_plain_words(tool: str, args: dict, words: str) -> None:
    assert describe(SimpleNamespace(tool=tool, args=args)) == words
