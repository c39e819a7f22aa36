"""GET /api/v1/runs/{run_id}, POST …/complete and …/abort: how a run ends."""

from __future__ import annotations

from datetime import datetime

import pytest
from rest_framework.test import APIClient

from tests.conftest import Shop
from tests.toolops.api.helpers import assert_problem, body, create_run, post_call
from toolops.models import Run, ToolCall

pytestmark = pytest.mark.django_db


def complete(client: APIClient, run_id: str = "r-1") -> object:
    return client.post(f"/api/v1/runs/{run_id}/complete", {}, format="json")


def abort(client: APIClient, run_id: str = "r-1", reason: str = "user cancelled") -> object:
    return client.post(f"/api/v1/runs/{run_id}/abort", {"reason": reason}, format="json")


def test_it_gets_a_run(api: APIClient) -> None:
    created = create_run(api, "r-1", session_key="conv-42")

    response = api.get("/api/v1/runs/r-1")

    assert response.status_code == 200, response.content
    run = body(response)
    assert run["run_id"] == "r-1"
    assert run["trace_id"] == created["trace_id"]
    assert run["session_key"] == "conv-42"
    assert run["status"] == "running"


def test_it_completes_a_run(api: APIClient) -> None:
    create_run(api)

    response = complete(api)

    assert response.status_code == 200, response.content
    run = body(response)
    assert run["status"] == "completed"
    assert run["ended_at"] is not None
    datetime.fromisoformat(run["ended_at"].replace("Z", "+00:00"))
    row = Run.objects.get(run_id="r-1")
    assert row.status == Run.Status.COMPLETED
    assert row.ended_at is not None


def test_it_completes_twice_with_200(api: APIClient) -> None:
    create_run(api)
    first = body(complete(api))

    again = complete(api)

    assert again.status_code == 200, again.content
    assert body(again)["status"] == "completed"
    assert body(again)["ended_at"] == first["ended_at"]


def test_it_refuses_to_abort_a_completed_run(api: APIClient) -> None:
    create_run(api)
    complete(api)

    response = abort(api)

    assert_problem(response, 409)
    row = Run.objects.get(run_id="r-1")
    assert row.status == Run.Status.COMPLETED
    assert row.end_reason == ""


def test_it_aborts_a_run_with_202(api: APIClient) -> None:
    create_run(api)

    response = abort(api)

    assert response.status_code == 202, response.content
    assert body(response)["status"] in ("aborting", "aborted")
    row = Run.objects.get(run_id="r-1")
    assert row.status in (Run.Status.ABORTING, Run.Status.ABORTED)


def test_it_aborts_without_a_body(api: APIClient) -> None:
    create_run(api)

    response = api.post("/api/v1/runs/r-1/abort")

    assert response.status_code == 202, response.content


def test_it_aborts_twice_with_202(api: APIClient) -> None:
    create_run(api)
    abort(api)

    again = abort(api)

    assert again.status_code == 202, again.content
    assert body(again)["status"] in ("aborting", "aborted")


def test_it_refuses_to_complete_an_aborted_run(api: APIClient) -> None:
    create_run(api)
    abort(api)

    response = complete(api)

    assert_problem(response, 409)
    assert Run.objects.get(run_id="r-1").status != Run.Status.COMPLETED


def test_it_refuses_to_complete_an_aborting_run(api: APIClient) -> None:
    create_run(api)
    Run.objects.filter(run_id="r-1").update(status=Run.Status.ABORTING)

    assert_problem(complete(api), 409)
    again = abort(api)
    assert again.status_code == 202, again.content
    assert Run.objects.get(run_id="r-1").status == Run.Status.ABORTING


def test_it_refuses_a_call_on_a_completed_run(api: APIClient) -> None:
    create_run(api)
    complete(api)

    response = post_call(api, step_index=0, tool="query_stock", args={"sku": "A12"})

    assert_problem(response, 409)
    assert not ToolCall.objects.exists()


def test_it_refuses_a_call_on_an_aborted_run(api: APIClient, shop: Shop) -> None:
    create_run(api)
    abort(api)

    response = post_call(api, step_index=0, tool="query_stock", args={"sku": "A12"})

    assert_problem(response, 409)
    assert not ToolCall.objects.exists()
    assert shop.requests() == []


def exhaust(api: APIClient) -> None:
    """Use the run's one attempt: the run becomes budget_exhausted."""
    first = post_call(api, step_index=0, tool="query_stock", args={"sku": "A12"})
    assert body(first)["status"] == "succeeded", first.content
    assert Run.objects.get(run_id="r-1").status == Run.Status.BUDGET_EXHAUSTED


def test_it_refuses_calls_once_the_budget_is_exhausted(api: APIClient, shop: Shop) -> None:
    create_run(api, budget={"max_attempts": 1})
    exhaust(api)

    response = post_call(api, step_index=1, tool="query_stock", args={"sku": "B7"})

    assert_problem(response, 409)
    assert ToolCall.objects.count() == 1
    assert len(shop.requests("/inventory/stock")) == 1
    assert body(api.get("/api/v1/runs/r-1"))["status"] == "budget_exhausted"


def test_it_completes_a_budget_exhausted_run(api: APIClient, shop: Shop) -> None:
    create_run(api, budget={"max_attempts": 1})
    exhaust(api)

    response = complete(api)

    assert response.status_code == 200, response.content
    assert body(response)["status"] == "completed"
    assert Run.objects.get(run_id="r-1").status == Run.Status.COMPLETED


def test_it_aborts_a_budget_exhausted_run(api: APIClient, shop: Shop) -> None:
    create_run(api, budget={"max_attempts": 1})
    exhaust(api)

    response = abort(api)

    assert response.status_code == 202, response.content
    assert body(response)["status"] in ("aborting", "aborted")


def test_it_discards_registered_compensations_on_complete(api: APIClient, shop: Shop) -> None:
    create_run(api)
    call = post_call(
        api, step_index=0, tool="reserve_stock", args={"sku": "A12", "qty": 1}, tool_call_id="tc-1"
    )
    assert body(call)["status"] == "succeeded", call.content
    registered = body(api.get("/api/v1/runs/r-1"))["compensations"]
    assert registered == [
        {"tool": "release_stock", "status": "registered", "for_tool_call_id": "tc-1"}
    ]

    response = complete(api)

    assert response.status_code == 200, response.content
    assert body(response)["compensations"] == [
        {"tool": "release_stock", "status": "discarded", "for_tool_call_id": "tc-1"}
    ]
    assert shop.requests("/inventory/reservations/release") == []
