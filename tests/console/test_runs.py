"""The runs list: newest first, filters, one search box, pages, constant query count."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from compensations.models import Compensation
from toolops.models import Agent, Run
from toolops.services import agent_create
from toolops.views import runs as run_views

from .conftest import make_call, make_run

pytestmark = pytest.mark.django_db


def run_ids(response: Any) -> list[str]:
    return [run.run_id for run in response.context["page"]]


@pytest.fixture
def runs(agent_a: tuple[Agent, str], agent_b: tuple[Agent, str]) -> dict[str, Run]:
    """r-old (agent-a, completed), r-mid (agent-b, running), r-new (agent-a, aborted)."""
    now = timezone.now()
    old = make_run(
        agent_a[0],
        "r-old",
        status="completed",
        trace_id="aaaa" + "0" * 28,
        created_at=now - timedelta(minutes=3),
    )
    mid = make_run(
        agent_b[0],
        "r-mid",
        status="running",
        trace_id="bbbb" + "0" * 28,
        created_at=now - timedelta(minutes=2),
    )
    new = make_run(
        agent_a[0],
        "r-new",
        status="aborted",
        trace_id="cccc" + "0" * 28,
        created_at=now - timedelta(minutes=1),
    )
    make_call(old, "tc-stock-1", 0, "query_stock", "succeeded")
    make_call(old, "tc-order-1", 1, "create_order", "succeeded")
    make_call(
        mid, "tc-stock-2", 0, "query_stock", "failed", error_class="retry", error_reason="timeout"
    )
    return {"old": old, "mid": mid, "new": new}


def test_it_lists_runs_newest_first_with_counts_and_summary(
    reviewer_client: Client, runs: dict[str, Run]
) -> None:
    response = reviewer_client.get("/console/runs/")

    assert response.status_code == 200
    assert run_ids(response) == ["r-new", "r-mid", "r-old"]
    page = response.content.decode()
    assert f'href="/console/runs/{runs["mid"].pk}/"' in page
    assert '<span class="badge s-running">running</span>' in page
    by_id = {run.run_id: run for run in response.context["page"]}
    assert by_id["r-old"].calls_count == 2
    assert by_id["r-new"].calls_count == 0
    assert by_id["r-old"].summary_head == "All 2 of 2 tool calls succeeded."
    # Only the first sentence of a partial run's summary.
    assert by_id["r-mid"].summary_head == (
        "Based on partial data: 0 of 1 tool call succeeded; query_stock (tc-stock-2) timed out."
    )
    # An aborted run's summary says so first (r-new was aborted before any call).
    assert by_id["r-new"].summary_head == ("Aborted before any tool call; nothing needed undoing.")


def test_it_filters_by_status(reviewer_client: Client, runs: dict[str, Run]) -> None:
    assert run_ids(reviewer_client.get("/console/runs/?status=running")) == ["r-mid"]
    assert run_ids(reviewer_client.get("/console/runs/?status=budget_exhausted")) == []


def test_it_filters_by_agent(
    reviewer_client: Client, runs: dict[str, Run], agent_a: tuple[Agent, str]
) -> None:
    response = reviewer_client.get(f"/console/runs/?agent={agent_a[0].pk}")

    assert run_ids(response) == ["r-new", "r-old"]
    assert f'<option value="{agent_a[0].pk}" selected>agent-a</option>' in response.content.decode()


def test_it_combines_filters(
    reviewer_client: Client, runs: dict[str, Run], agent_a: tuple[Agent, str]
) -> None:
    response = reviewer_client.get(f"/console/runs/?agent={agent_a[0].pk}&status=completed")

    assert run_ids(response) == ["r-old"]


def test_it_ignores_an_invalid_filter_value(reviewer_client: Client, runs: dict[str, Run]) -> None:
    response = reviewer_client.get("/console/runs/?status=bogus&agent=nope")

    assert response.status_code == 200
    assert run_ids(response) == ["r-new", "r-mid", "r-old"]


@pytest.mark.parametrize(
    ("q", "expected"),
    [
        ("r-mid", ["r-mid"]),  # run_id, exact
        ("r-", ["r-new", "r-mid", "r-old"]),  # run_id prefix
        ("cccc" + "0" * 28, ["r-new"]),  # trace_id, exact
        ("bbbb", ["r-mid"]),  # trace_id prefix
        ("tc-order-1", ["r-old"]),  # a call's tool_call_id, exact
        ("tc-stock", ["r-mid", "r-old"]),  # tool_call_id prefix, each run once
        ("tc-nothing", []),
        ("%", []),  # LIKE wildcards are literal
    ],
)
def test_it_searches_run_id_trace_id_and_tool_call_id(
    reviewer_client: Client, runs: dict[str, Run], q: str, expected: list[str]
) -> None:
    assert run_ids(reviewer_client.get("/console/runs/", {"q": q})) == expected


def test_it_searches_a_calls_call_id(reviewer_client: Client, runs: dict[str, Run]) -> None:
    call = runs["mid"].calls.get()

    assert run_ids(reviewer_client.get("/console/runs/", {"q": call.call_id})) == ["r-mid"]


def test_it_keeps_the_calls_count_right_when_searching_by_call(
    reviewer_client: Client, runs: dict[str, Run]
) -> None:
    response = reviewer_client.get("/console/runs/", {"q": "tc-order-1"})

    assert [run.calls_count for run in response.context["page"]] == [2]


def test_it_paginates_fifty_runs_a_page_keeping_filters(
    reviewer_client: Client, agent_a: tuple[Agent, str]
) -> None:
    now = timezone.now()
    for i in range(53):
        make_run(agent_a[0], f"r-{i:03}", created_at=now - timedelta(seconds=i))

    first = reviewer_client.get("/console/runs/?status=running")
    second = reviewer_client.get("/console/runs/?status=running&page=2")

    assert len(run_ids(first)) == 50
    assert run_ids(first)[0] == "r-000"
    assert run_ids(second) == ["r-050", "r-051", "r-052"]
    assert 'href="?status=running&amp;page=2"' in first.content.decode()


def make_busy_runs(agent: Agent, count: int, calls_each: int) -> None:
    for i in range(count):
        run = make_run(agent, f"busy-{i}")
        for j in range(calls_each):
            make_call(run, f"tc-{i}-{j}", j, "query_stock", "succeeded" if j % 2 else "failed")


# session, user, the user's groups, the nav's three counts, agents for the filter, the
# runs matching the filter (their ids), count, the page, its calls, its compensations; and
# the view's own transaction planning for values (@custom_plans: a savepoint here, the
# SET LOCAL, its release).
RUNS_LIST_QUERIES = 15


@pytest.mark.parametrize(("runs_count", "calls_each"), [(1, 1), (20, 3)])
def test_it_lists_runs_in_a_constant_number_of_queries(
    reviewer_client: Client,
    django_assert_num_queries: Any,
    runs_count: int,
    calls_each: int,
) -> None:
    for i in range(3):
        agent, _ = agent_create(name=f"agent-{i}")
        make_busy_runs(agent, runs_count, calls_each)

    with django_assert_num_queries(RUNS_LIST_QUERIES):
        response = reviewer_client.get("/console/runs/", {"q": "busy"})
        response.content  # noqa: B018  (rendered already; make the intent plain)

    assert len(run_ids(response)) == min(50, 3 * runs_count)


def _succeeded_with_undo(run: Run, undo_status: str, *undo_tools: str) -> None:
    """Three calls that succeeded; one compensation per undo tool, in `undo_status`."""
    tools = ("reserve_stock", "create_order", "charge")
    for step, tool in enumerate(tools):
        call = make_call(run, f"tc-{step}", step, tool, "succeeded")
        if step < len(undo_tools):
            Compensation.objects.create(
                run=run,
                call=call,
                tool=undo_tools[step],
                status=undo_status,
                key=f"{run.pk}-{step}",
            )


def test_it_says_an_aborted_run_was_aborted_and_what_was_undone(
    reviewer_client: Client, agent_a: tuple[Agent, str]
) -> None:
    aborted = make_run(agent_a[0], "r-aborted", status="aborted")
    _succeeded_with_undo(aborted, "succeeded", "release_stock", "cancel_order")
    failed = make_run(agent_a[0], "r-undo-failed", status="compensation_failed")
    _succeeded_with_undo(failed, "dead_lettered", "refund")
    aborting = make_run(agent_a[0], "r-aborting", status="aborting")
    _succeeded_with_undo(aborting, "pending", "release_stock")

    response = reviewer_client.get("/console/runs/")

    heads = {run.run_id: run.summary_head for run in response.context["page"]}
    assert heads["r-aborted"] == (
        "Aborted after 3 of 3 tool calls succeeded; undone: cancel_order, release_stock."
    )
    assert heads["r-undo-failed"] == (
        "Aborted after 3 of 3 tool calls succeeded; failed to undo: refund (a support "
        "ticket is open)."
    )
    assert heads["r-aborting"] == (
        "Aborting after 3 of 3 tool calls succeeded; still undoing: release_stock."
    )
    page = response.content.decode()
    assert "All 3 of 3 tool calls succeeded" not in page


def test_a_broad_filter_past_the_listed_matches_still_finds_every_run(
    reviewer_client: Client, runs: dict[str, Run], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Past MATCHES_LISTED the filter goes to the database as a subquery, not as ids.
    monkeypatch.setattr(run_views, "MATCHES_LISTED", 1)

    def found(q: str) -> list[str]:
        return run_ids(reviewer_client.get("/console/runs/", {"q": q}))

    assert found("r-") == ["r-new", "r-mid", "r-old"]
    assert found("tc-stock") == ["r-mid", "r-old"]
    assert found("r-mid") == ["r-mid"]
