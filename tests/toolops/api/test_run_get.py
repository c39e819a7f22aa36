"""GET /api/v1/runs/{run_id}: a long run's calls come 1,000 at a time, in step order,
with `calls_next` and `calls_total`; its usage and summary still speak of every call."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from tests.toolops.api.helpers import assert_problem, body, create_run
from toolops.ids import new_call_id
from toolops.models import Agent, Run, ToolCall

pytestmark = pytest.mark.django_db

S = ToolCall.Status


def add_calls(run: Run, count: int, *, status: str = S.SUCCEEDED, first_step: int = 0) -> None:
    """`count` recorded calls, one a step, inserted in one statement."""
    start = timezone.now()
    ToolCall.objects.bulk_create(
        ToolCall(
            run=run,
            call_id=new_call_id(),
            tool_call_id=f"tc-{first_step + n}",
            step_index=first_step + n,
            tool="query_stock",
            args={"sku": "A12"},
            args_digest="0" * 64,
            status=status,
            attempts=1,
            tokens=10,
            feedback="query_stock succeeded.",
            created_at=start + timedelta(microseconds=n),
            finished_at=start,
        )
        for n in range(count)
    )


def run_of(agent: Agent, run_id: str = "r-1") -> Run:
    return Run.objects.get(agent=agent, run_id=run_id)


def test_it_answers_a_short_run_whole_without_paging_fields(
    api: APIClient, agent_a: tuple[Agent, str]
) -> None:
    create_run(api)
    add_calls(run_of(agent_a[0]), 3)

    run = body(api.get("/api/v1/runs/r-1"))

    assert [c["tool_call_id"] for c in run["calls"]] == ["tc-0", "tc-1", "tc-2"]
    assert "calls_next" not in run and "calls_total" not in run


def test_it_pages_a_run_of_1001_calls(api: APIClient, agent_a: tuple[Agent, str]) -> None:
    create_run(api)
    add_calls(run_of(agent_a[0]), 1001)

    first = api.get("/api/v1/runs/r-1")

    assert first.status_code == 200, first.content[:300]
    page = body(first)
    assert len(page["calls"]) == 1000
    assert page["calls"][0]["tool_call_id"] == "tc-0"
    assert page["calls"][-1]["tool_call_id"] == "tc-999"
    assert page["calls_total"] == 1001
    last_id = page["calls"][-1]["call_id"]
    assert page["calls_next"] == f"/api/v1/runs/r-1?calls_after={last_id}"
    # The whole run, not the page: usage, summary, where it stopped.
    assert page["usage"]["attempts"] == 1001 and page["usage"]["tokens"] == 10010
    assert page["summary"] == "All 1001 of 1001 tool calls succeeded."
    assert page["last_succeeded_tool_call_id"] == "tc-1000"

    second = body(api.get(page["calls_next"]))

    assert [c["tool_call_id"] for c in second["calls"]] == ["tc-1000"]
    assert second["calls_total"] == 1001
    assert second["calls_next"] is None
    assert second["summary"] == page["summary"]


def test_it_orders_calls_by_step_not_by_arrival(api: APIClient, agent_a: tuple[Agent, str]) -> None:
    create_run(api)
    run = run_of(agent_a[0])
    add_calls(run, 2, first_step=5)  # arrived first, later steps
    add_calls(run, 2, first_step=0)

    run_body = body(api.get("/api/v1/runs/r-1"))

    assert [c["step_index"] for c in run_body["calls"]] == [0, 1, 5, 6]


def test_it_sums_up_a_long_run_with_problems_and_waits(
    api: APIClient, agent_a: tuple[Agent, str]
) -> None:
    create_run(api)
    run = run_of(agent_a[0])
    add_calls(run, 1000)
    add_calls(run, 7, status=S.FAILED, first_step=1000)
    add_calls(run, 1, status=S.PENDING_APPROVAL, first_step=1007)

    page = body(api.get("/api/v1/runs/r-1"))

    assert page["calls_total"] == 1008
    summary = page["summary"]
    assert summary.startswith("Based on partial data: 1000 of 1008 tool calls succeeded;")
    assert "query_stock (tc-1000) failed" in summary and "and 2 more" in summary
    assert "Waiting: query_stock (tc-1007) is waiting for approval." in summary
    assert page["last_succeeded_tool_call_id"] == "tc-999"


def test_it_follows_calls_after_in_the_middle(api: APIClient, agent_a: tuple[Agent, str]) -> None:
    create_run(api)
    add_calls(run_of(agent_a[0]), 5)
    third = ToolCall.objects.get(tool_call_id="tc-2").call_id

    page = body(api.get(f"/api/v1/runs/r-1?calls_after={third}"))

    assert [c["tool_call_id"] for c in page["calls"]] == ["tc-3", "tc-4"]
    assert page["calls_total"] == 5 and page["calls_next"] is None


@pytest.mark.parametrize("after", ["", "c 1", "c-1\n", "x" * 129])
def test_it_refuses_a_malformed_calls_after(api: APIClient, after: str) -> None:
    create_run(api)

    response = api.get("/api/v1/runs/r-1", {"calls_after": after})

    assert "calls_after" in assert_problem(response, 400)["detail"]


def test_it_refuses_a_calls_after_of_another_run(
    api: APIClient, agent_a: tuple[Agent, str], agent_b: tuple[Agent, str]
) -> None:
    create_run(api)
    create_run(api, "r-2")
    add_calls(run_of(agent_a[0], "r-2"), 1)
    elsewhere = ToolCall.objects.get().call_id

    for after in (elsewhere, "c-unknown"):
        response = api.get(f"/api/v1/runs/r-1?calls_after={after}")

        problem = assert_problem(response, 400)
        assert "calls_after" in problem["detail"] and "is not a call of run" in problem["detail"]


def queries_for(api: APIClient, django_assert_num_queries: Any, url: str, count: int) -> None:
    with django_assert_num_queries(count):
        response = api.get(url)
    assert response.status_code == 200, response.content[:300]


# The run (the token is checked from a cache), its calls' page, its compensations.
SHORT_RUN_QUERIES = 3
# Then the cursor, and the long run's tally (counts, problems, waits, last success).
LONG_RUN_QUERIES = SHORT_RUN_QUERIES + 4
NEXT_PAGE_QUERIES = LONG_RUN_QUERIES + 1


def test_it_reads_a_run_in_as_many_queries_however_long(
    api: APIClient, agent_a: tuple[Agent, str], django_assert_num_queries: Any
) -> None:
    create_run(api)
    run = run_of(agent_a[0])
    add_calls(run, 10)
    queries_for(api, django_assert_num_queries, "/api/v1/runs/r-1", SHORT_RUN_QUERIES)
    add_calls(run, 900, first_step=10)
    queries_for(api, django_assert_num_queries, "/api/v1/runs/r-1", SHORT_RUN_QUERIES)
    add_calls(run, 1200, first_step=910)
    queries_for(api, django_assert_num_queries, "/api/v1/runs/r-1", LONG_RUN_QUERIES)
    after = ToolCall.objects.get(tool_call_id="tc-999").call_id
    url = f"/api/v1/runs/r-1?calls_after={after}"
    queries_for(api, django_assert_num_queries, url, NEXT_PAGE_QUERIES)


def test_the_schema_describes_the_paging(api: APIClient) -> None:
    schema = body(api.get("/api/v1/schema/?format=json"))

    run = schema["components"]["schemas"]["RunSchema"]
    assert run["properties"]["calls_total"]["type"] == "integer"
    assert run["properties"]["calls_next"]["nullable"] is True
    assert "calls_next" not in run["required"] and "calls_total" not in run["required"]
    get = schema["paths"]["/api/v1/runs/{run_id}"]["get"]
    assert "calls_after" in [p["name"] for p in get["parameters"]]
