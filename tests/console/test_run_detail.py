"""The run detail: where the run stopped, each call's attempts and idempotency record,
the htmx polling fragment, and a constant query count."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client
from rest_framework.test import APIClient

from toolops.models import Agent, Run, ToolCall

from .conftest import make_attempt, make_call, make_record, make_run

pytestmark = pytest.mark.django_db

KEY = "5f1c0a2b9d8e7f60" + "a" * 48


@pytest.fixture
def run(agent_a: tuple[Agent, str]) -> Run:
    """tc-1 query_stock succeeded; tc-2 reserve_stock succeeded after a retry; tc-3
    create_order unknown after a timeout, with its claim still held."""
    run = make_run(
        agent_a[0],
        "r-118",
        trace_id="4bf92f3577b34da6a3ce929d0e0e4736",
        session_key="conv-42",
        max_attempts=20,
        attempts_used=4,
        tokens_used=5100,
    )
    make_call(
        run,
        "tc-1",
        0,
        "query_stock",
        "succeeded",
        args={"sku": "A12"},
        result={"sku": "A12", "available": 7},
        attempts=1,
    )
    reserve = make_call(
        run,
        "tc-2",
        1,
        "reserve_stock",
        "succeeded",
        attempts=2,
        args={"sku": "A12", "qty": 1},
        idempotency_key="b" * 64,
        result={"reservation_id": "res-9"},
    )
    make_attempt(
        reserve,
        1,
        http_status=503,
        outcome="retry",
        reason="downstream_error",
        error="503 Service Unavailable",
        downstream_request_id="req-first",
    )
    make_attempt(reserve, 2, http_status=201, waited_ms=180.0, downstream_request_id="req-second")
    make_record(reserve, state="recorded")
    order = make_call(
        run,
        "tc-3",
        2,
        "create_order",
        "unknown",
        attempts=2,
        idempotency_key=KEY,
        args={"sku": "A12", "qty": 1, "amount": "199.00"},
        error_class="unknown",
        error_reason="timeout",
        error_message="orders service timed out after 2 attempts",
        feedback="Order creation timed out and its outcome is unknown. Do not retry.",
    )
    make_attempt(
        order,
        1,
        outcome="unknown",
        reason="timeout",
        error="read timeout",
        duration_ms=2001.0,
        downstream_request_id="req-order-1",
    )
    make_attempt(
        order,
        2,
        purpose="reconcile",
        outcome="unknown",
        reason="timeout",
        duration_ms=2002.0,
        downstream_request_id="req-lookup-1",
    )
    make_record(order, state="claimed", fence=2)
    return run


def test_it_shows_the_run_header(reviewer_client: Client, run: Run) -> None:
    page = reviewer_client.get(f"/console/runs/{run.pk}/").content.decode()

    for text in (
        "r-118",
        "4bf92f3577b34da6a3ce929d0e0e4736",
        "conv-42",
        "agent-a",
        '<span class="badge s-running">running</span>',
    ):
        assert text in page
    assert re.search(r"attempts used / budget</dt>\s*<dd>4 / 20</dd>", page)
    assert re.search(r"tokens used / budget</dt>\s*<dd>5100 / no limit</dd>", page)


def test_it_shows_the_summary_and_where_the_run_stopped(reviewer_client: Client, run: Run) -> None:
    response = reviewer_client.get(f"/console/runs/{run.pk}/")
    page = response.content.decode()

    assert "Based on partial data: 2 of 3 tool calls succeeded" in page
    assert response.context["last_succeeded"] == "tc-2"
    ids = dict(ToolCall.objects.values_list("tool_call_id", "call_id"))
    link = f'<a class="last-succeeded-id" href="#call-{ids["tc-2"]}"><code>tc-2</code></a>'
    assert link in page
    assert f'<tbody id="call-{ids["tc-2"]}" class="call st-done last-succeeded"' in page
    assert f'<tbody id="call-{ids["tc-1"]}" class="call st-done"' in page
    # The next step, its last attempt and downstream request id.
    assert response.context["stop"].call.tool_call_id == "tc-3"
    assert "<code>req-lookup-1</code>" in page


def test_it_shows_each_calls_attempts_error_feedback_and_key(
    reviewer_client: Client, run: Run
) -> None:
    page = reviewer_client.get(f"/console/runs/{run.pk}/").content.decode()

    # Calls in order.
    ids = dict(ToolCall.objects.values_list("tool_call_id", "call_id"))
    positions = [page.index(f'id="call-{ids[f"tc-{n}"]}"') for n in (1, 2, 3)]
    assert positions == sorted(positions)
    # Attempts, with the retry's backoff and both downstream request ids.
    for text in (
        "req-first",
        "req-second",
        "503 Service Unavailable",
        "180.0",
        "reconcile",
        "req-order-1",
        "2001.0",
        '<span class="badge o-retry">retry</span>',
    ):
        assert text in page
    # The key, shortened, with the full value in the title.
    assert f'<code title="{KEY}">{KEY[:12]}…</code>' in page
    # Error class / reason / message and the feedback for the model.
    error = '<span class="err-class">unknown</span> / <span class="err-reason">timeout</span>'
    assert error in page
    assert "orders service timed out after 2 attempts" in page
    assert "Order creation timed out and its outcome is unknown. Do not retry." in page
    # Args and result, pretty-printed inside collapsed <details>.
    assert "<summary>args</summary><pre>{\n  &quot;sku&quot;: &quot;A12&quot;" in page
    assert "&quot;reservation_id&quot;: &quot;res-9&quot;" in page


def test_it_shows_each_calls_idempotency_record(reviewer_client: Client, run: Run) -> None:
    response = reviewer_client.get(f"/console/runs/{run.pk}/")
    rows = {row.call.tool_call_id: row for row in response.context["rows"]}

    assert rows["tc-1"].record is None  # a read: nothing recorded
    assert rows["tc-2"].record.state == "recorded"
    assert (rows["tc-3"].record.state, rows["tc-3"].record.fence) == ("claimed", 2)
    page = response.content.decode()
    assert re.search(r"<dt>state</dt><dd>claimed</dd></div>\s*<div><dt>fence</dt><dd>2</dd>", page)


def test_it_escapes_what_agents_and_downstreams_sent(
    reviewer_client: Client, agent_a: tuple[Agent, str]
) -> None:
    run = make_run(agent_a[0], "r-xss")
    make_call(
        run,
        "tc-x",
        0,
        "query_stock",
        "failed",
        args={"sku": "<script>alert(1)</script>"},
        error_message="<img src=x onerror=alert(1)>",
    )

    page = reviewer_client.get(f"/console/runs/{run.pk}/").content.decode()

    assert "<script>alert(1)" not in page
    assert "<img src=x" not in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page


def test_it_answers_404_for_a_missing_run(reviewer_client: Client) -> None:
    assert reviewer_client.get("/console/runs/999999/").status_code == 404


def test_it_polls_while_the_run_can_still_change(reviewer_client: Client, run: Run) -> None:
    running = reviewer_client.get(f"/console/runs/{run.pk}/").content.decode()
    assert f'hx-get="/console/runs/{run.pk}/" hx-trigger="every 3s" hx-swap="outerHTML"' in running

    Run.objects.filter(pk=run.pk).update(status=Run.Status.COMPLETED)
    done = reviewer_client.get(f"/console/runs/{run.pk}/").content.decode()
    assert "hx-trigger" not in done


def test_it_serves_the_body_fragment_to_htmx(reviewer_client: Client, run: Run) -> None:
    response = reviewer_client.get(f"/console/runs/{run.pk}/", headers={"HX-Request": "true"})

    page = response.content.decode()
    assert response.status_code == 200
    assert page.lstrip().startswith('<div id="run-body"')
    assert "<html" not in page
    assert "req-second" in page
    assert "HX-Request" in response["Vary"]

    full = reviewer_client.get(f"/console/runs/{run.pk}/")
    assert "HX-Request" in full["Vary"]
    assert "<html" in full.content.decode()


def add_calls(run: Run, count: int) -> None:
    for i in range(count):
        call = make_call(
            run, f"more-{i}", 10 + i, "reserve_stock", "succeeded", idempotency_key=f"{i:064d}"
        )
        make_attempt(call, 1)
        make_attempt(call, 2)
        make_record(call)


# session, user, the user's groups, the run with its agent, all its calls (a few columns),
# the shown calls whole (with who settled them and their approvals), their attempts, their
# idempotency records, all its compensations (a few columns: their totals), the shown
# calls' compensations (with their calls and tickets), the user's two permission lookups
# (may they read full args?), the nav's three counts (unknown outcomes, open tickets,
# pending approvals).
RUN_DETAIL_QUERIES = 15


@pytest.mark.parametrize("extra_calls", [0, 25])
def test_it_shows_a_run_in_a_constant_number_of_queries(
    reviewer_client: Client, run: Run, django_assert_num_queries: Any, extra_calls: int
) -> None:
    add_calls(run, extra_calls)

    with django_assert_num_queries(RUN_DETAIL_QUERIES):
        response = reviewer_client.get(f"/console/runs/{run.pk}/")

    assert len(response.context["rows"]) == 3 + extra_calls


def test_it_shows_a_run_made_through_the_api(
    api: APIClient, shop: Any, reviewer_client: Client
) -> None:
    """The real executor: a retried reservation, its two attempts and its claim."""
    shop.fault("/inventory/reservations", fail_next=1, fail_status=503)
    assert api.post("/api/v1/runs", {"run_id": "r-real"}, format="json").status_code == 201
    answer = api.post(
        "/api/v1/runs/r-real/calls",
        {
            "step_index": 0,
            "tool": "reserve_stock",
            "args": {"sku": "A12", "qty": 1},
            "tool_call_id": "tc-reserve",
        },
        format="json",
    )
    assert answer.json()["status"] == "succeeded", answer.json()
    call = ToolCall.objects.get(tool_call_id="tc-reserve")

    response = reviewer_client.get(f"/console/runs/{call.run_id}/")

    (row,) = response.context["rows"]
    assert [a.attempt.http_status for a in row.attempts] == [503, 200]
    assert all(a.attempt.downstream_request_id for a in row.attempts)
    assert row.record is not None and row.record.state == "recorded"
    page = response.content.decode()
    assert row.attempts[1].attempt.downstream_request_id in page
    assert f'title="{call.idempotency_key}"' in page
    assert response.context["last_succeeded"] == "tc-reserve"
