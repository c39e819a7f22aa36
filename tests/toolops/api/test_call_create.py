"""POST /api/v1/runs/{run_id}/calls and GET /api/v1/calls/{call_id}, against the real
demo shop over HTTP."""

from __future__ import annotations

import json
from typing import Any

import pytest
from rest_framework.test import APIClient

from tests.conftest import Shop
from tests.toolops.api.helpers import assert_problem, body, create_run, post_call
from toolops.models import Run, ToolCall
from toolops.tools import registry

pytestmark = pytest.mark.django_db

STOCK = "/inventory/stock"
RESERVE = "/inventory/reservations"
ERROR_CLASSES = {"fatal", "retry", "unknown"}


@pytest.fixture
def run(api: APIClient, shop: Shop) -> dict[str, Any]:
    return create_run(api, "r-1")


def call(client: APIClient, **fields: Any) -> dict[str, Any]:
    response = post_call(client, "r-1", **fields)
    assert response.status_code == 200, response.content
    return body(response)


def assert_feedback(data: dict[str, Any]) -> None:
    assert isinstance(data["feedback"], str) and data["feedback"].strip(), data
    assert len(data["feedback"]) <= 400, data["feedback"]
    assert "Traceback" not in data["feedback"]


def test_it_runs_a_read_call(api: APIClient, run: dict[str, Any], shop: Shop) -> None:
    data = call(api, step_index=0, tool="query_stock", args={"sku": "A12"})

    assert data["status"] == "succeeded"
    assert data["result"] == {"sku": "A12", "available": 50}
    assert data["attempts"] == 1
    assert data["replayed"] is False
    assert data["error"] is None
    assert data["approval"] is None
    assert data["run_id"] == "r-1"
    assert data["step_index"] == 0
    assert data["tool"] == "query_stock"
    assert data["call_id"]
    assert data["tool_call_id"]
    assert data["finished_at"] is not None
    assert_feedback(data)
    assert len(shop.requests(STOCK)) == 1
    row = ToolCall.objects.get(call_id=data["call_id"])
    assert row.status == ToolCall.Status.SUCCEEDED
    assert row.run.run_id == "r-1"


def test_it_accepts_args_as_a_json_string(api: APIClient, run: dict[str, Any], shop: Shop) -> None:
    data = call(api, step_index=0, tool="query_stock", args=json.dumps({"sku": "A12"}))

    assert data["status"] == "succeeded", data
    assert data["result"] == {"sku": "A12", "available": 50}
    assert shop.requests(STOCK)[0]["body"] == {"sku": "A12"}


def test_it_keeps_the_tool_call_id_exactly(api: APIClient, run: dict[str, Any], shop: Shop) -> None:
    tool_call_id = "call_AbC.9:x-Y_z"

    data = call(
        api, step_index=0, tool="query_stock", args={"sku": "A12"}, tool_call_id=tool_call_id
    )

    assert data["tool_call_id"] == tool_call_id
    assert ToolCall.objects.get(call_id=data["call_id"]).tool_call_id == tool_call_id
    assert shop.requests(STOCK)[0]["headers"]["x-toolops-tool-call-id"] == tool_call_id


def test_it_replays_a_write_by_tool_call_id(
    api: APIClient, run: dict[str, Any], shop: Shop
) -> None:
    request = {"step_index": 0, "tool": "reserve_stock", "args": {"sku": "A12", "qty": 2}}
    first = call(api, **request, tool_call_id="tc-w")

    again = call(api, **request, tool_call_id="tc-w")

    assert first["status"] == "succeeded", first
    assert first["replayed"] is False
    assert again["replayed"] is True
    assert again["call_id"] == first["call_id"]
    assert again["result"] == first["result"]
    assert len(shop.requests(RESERVE)) == 1
    assert shop.state()["stock"]["A12"] == 48
    assert ToolCall.objects.count() == 1


def test_it_replays_a_read_by_tool_call_id(api: APIClient, run: dict[str, Any], shop: Shop) -> None:
    request = {"step_index": 0, "tool": "query_stock", "args": {"sku": "A12"}}
    first = call(api, **request, tool_call_id="tc-r")

    again = call(api, **request, tool_call_id="tc-r")

    assert again["replayed"] is True
    assert again["call_id"] == first["call_id"]
    assert len(shop.requests(STOCK)) == 1
    assert ToolCall.objects.count() == 1


def test_it_replays_a_write_with_jittered_args(
    api: APIClient, run: dict[str, Any], shop: Shop
) -> None:
    first = call(api, step_index=3, tool="reserve_stock", args={"sku": "A12", "qty": 2})

    again = call(api, step_index=3, tool="reserve_stock", args={"qty": 2.0, "sku": " A12 "})

    assert again["replayed"] is True
    assert again["call_id"] == first["call_id"]
    assert len(shop.requests(RESERVE)) == 1
    assert ToolCall.objects.count() == 1


def test_it_refuses_a_tool_call_id_reused_for_other_args(
    api: APIClient, run: dict[str, Any], shop: Shop
) -> None:
    call(api, step_index=0, tool="reserve_stock", args={"sku": "A12", "qty": 2}, tool_call_id="t1")

    other_args = post_call(
        api, step_index=0, tool="reserve_stock", args={"sku": "A12", "qty": 3}, tool_call_id="t1"
    )
    other_step = post_call(
        api, step_index=1, tool="reserve_stock", args={"sku": "A12", "qty": 2}, tool_call_id="t1"
    )
    other_tool = post_call(
        api, step_index=0, tool="query_stock", args={"sku": "A12"}, tool_call_id="t1"
    )

    assert_problem(other_args, 409)
    assert_problem(other_step, 409)
    assert_problem(other_tool, 409)
    assert ToolCall.objects.count() == 1
    assert len(shop.requests(RESERVE)) == 1
    assert shop.requests(STOCK) == []


def test_it_executes_a_repeated_read_again(api: APIClient, run: dict[str, Any], shop: Shop) -> None:
    first = call(api, step_index=0, tool="query_stock", args={"sku": "A12"}, tool_call_id="a")
    second = call(api, step_index=0, tool="query_stock", args={"sku": "A12"}, tool_call_id="b")
    third = call(api, step_index=0, tool="query_stock", args={"sku": "A12"})

    assert second["replayed"] is False
    assert third["replayed"] is False
    assert len({first["call_id"], second["call_id"], third["call_id"]}) == 3
    assert len(shop.requests(STOCK)) == 3
    assert ToolCall.objects.count() == 3


def test_it_fails_an_unknown_tool_without_calling_anything(
    api: APIClient, run: dict[str, Any], shop: Shop
) -> None:
    data = call(api, step_index=0, tool="create_ordr", args={"sku": "A12"})

    assert data["status"] == "failed"
    assert data["error"]["class"] == "fatal"
    assert data["error"]["reason"] == "unknown_tool"
    assert "create_order" in data["feedback"]
    assert data["attempts"] == 0
    assert_feedback(data)
    assert shop.requests() == []
    assert ToolCall.objects.get(call_id=data["call_id"]).status == ToolCall.Status.FAILED


def test_it_records_any_well_formed_unknown_name_as_unknown_tool(
    api: APIClient, run: dict[str, Any], shop: Shop
) -> None:
    name = "Lookup-Weather_2" + "x" * 48  # 64 characters: the longest name a tool can have

    data = call(api, step_index=0, tool=name, args={})

    assert (data["status"], data["error"]["reason"], data["tool"]) == (
        "failed",
        "unknown_tool",
        name,
    )
    assert_feedback(data)
    assert ToolCall.objects.get(call_id=data["call_id"]).tool == name
    assert shop.requests() == []


@pytest.mark.parametrize(
    "tool",
    [
        "ann@example.com",
        "create order",
        "create_order()",
        "créer_commande",
        "tools/create_order",
        "x" * 65,
        "",
    ],
)
def test_it_refuses_a_name_that_cannot_be_a_tool(
    api: APIClient, run: dict[str, Any], shop: Shop, tool: str
) -> None:
    response = post_call(api, "r-1", step_index=0, tool=tool, args={})

    problem = assert_problem(response, 400)
    assert problem["detail"] == "tool: must be a tool name: 1–64 characters from [a-zA-Z0-9_-]"
    assert list(problem["errors"]) == ["tool"], problem
    # Nothing recorded: the name is in no row, so in no metric, page or export.
    assert not ToolCall.objects.exists()
    assert Run.objects.get(run_id="r-1").tokens_used == 0
    assert shop.requests() == []


@pytest.mark.parametrize("tool", [" query_stock", "query_stock ", "query_stock\n"])
def test_it_refuses_a_name_with_white_space_instead_of_trimming_it(
    api: APIClient, run: dict[str, Any], shop: Shop, tool: str
) -> None:
    response = post_call(api, "r-1", step_index=0, tool=tool, args={"sku": "A12"})

    assert_problem(response, 400)
    assert not ToolCall.objects.exists()
    assert shop.requests() == []


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("release_stock", {"reservation_id": "res_1"}),
        ("query_order", {"client_reference": "ref-1"}),
        ("refund", {"charge_id": "ch_1"}),
    ],
)
def test_it_treats_an_internal_tool_as_unknown(
    api: APIClient, run: dict[str, Any], shop: Shop, tool: str, args: dict[str, Any]
) -> None:
    data = call(api, step_index=0, tool=tool, args=args)

    assert data["status"] == "failed"
    assert data["error"]["class"] == "fatal"
    assert data["error"]["reason"] == "unknown_tool"
    assert_feedback(data)
    assert shop.requests() == []


@pytest.mark.parametrize(
    ("args", "field"),
    [
        ({"sku": "A12", "qty": "lots"}, "qty"),
        ({"qty": 1}, "sku"),
        ({"sku": "A12", "qty": 0}, "qty"),
        ('{"sku": "A12", "qty": ', "args"),
        ("[1, 2]", "args"),
    ],
)
def test_it_fails_invalid_args_without_calling_anything(
    api: APIClient, run: dict[str, Any], shop: Shop, args: Any, field: str
) -> None:
    data = call(api, step_index=0, tool="reserve_stock", args=args)

    assert data["status"] == "failed", data
    assert data["error"]["class"] == "fatal"
    assert data["error"]["reason"] == "invalid_args"
    assert field in data["feedback"], data["feedback"]
    assert data["attempts"] == 0
    assert_feedback(data)
    assert shop.requests() == []
    assert shop.state()["counts"]["reservations"] == 0


@pytest.mark.parametrize(
    ("fields", "name"),
    [
        ({"step_index": -1, "tool": "query_stock", "args": {"sku": "A12"}}, "step_index"),
        ({"tool": "query_stock", "args": {"sku": "A12"}}, "step_index"),
        ({"step_index": "one", "tool": "query_stock", "args": {"sku": "A12"}}, "step_index"),
        ({"step_index": 0, "args": {"sku": "A12"}}, "tool"),
        ({"step_index": 0, "tool": "query_stock"}, "args"),
        ({"step_index": 0, "tool": "query_stock", "args": ["A12"]}, "args"),
        ({"step_index": 0, "tool": "query_stock", "args": 5}, "args"),
        ({"step_index": 0, "tool": "query_stock", "args": None}, "args"),
        (
            {"step_index": 0, "tool": "query_stock", "args": {"sku": "A12"}, "wait": 31},
            "wait",
        ),
        (
            {"step_index": 0, "tool": "query_stock", "args": {"sku": "A12"}, "wait": -1},
            "wait",
        ),
        (
            {"step_index": 0, "tool": "query_stock", "args": {"sku": "A12"}, "tokens": -1},
            "tokens",
        ),
        (
            {"step_index": 0, "tool": "query_stock", "args": {"sku": "A12"}, "tool_call_id": ""},
            "tool_call_id",
        ),
        (
            {
                "step_index": 0,
                "tool": "query_stock",
                "args": {"sku": "A12"},
                "tool_call_id": "has space",
            },
            "tool_call_id",
        ),
        (
            {
                "step_index": 0,
                "tool": "query_stock",
                "args": {"sku": "A12"},
                "depends_on": ["tc-nope"],
            },
            "depends_on",
        ),
    ],
)
def test_it_rejects_a_bad_request_and_writes_nothing(
    api: APIClient, run: dict[str, Any], shop: Shop, fields: dict[str, Any], name: str
) -> None:
    response = post_call(api, "r-1", **fields)

    problem = assert_problem(response, 400)
    assert name in problem["detail"], problem
    assert not ToolCall.objects.exists()
    assert shop.requests() == []
    assert Run.objects.get(run_id="r-1").tokens_used == 0


def test_it_rejects_nan_in_args(api: APIClient, run: dict[str, Any], shop: Shop) -> None:
    raw = '{"step_index": 0, "tool": "reserve_stock", "args": {"sku": "A12", "qty": NaN}}'

    response = api.generic("POST", "/api/v1/runs/r-1/calls", raw, content_type="application/json")

    assert_problem(response, 400)
    assert not ToolCall.objects.exists()
    assert shop.requests() == []


def test_it_skips_a_call_whose_dependency_failed(
    api: APIClient, run: dict[str, Any], shop: Shop
) -> None:
    failed = call(api, step_index=0, tool="create_ordr", args={}, tool_call_id="tc-1")
    assert failed["status"] == "failed"

    data = call(
        api,
        step_index=1,
        tool="reserve_stock",
        args={"sku": "A12", "qty": 1},
        depends_on=["tc-1"],
    )

    assert data["status"] == "skipped"
    assert data["error"]["reason"] == "dependency_failed"
    assert data["error"]["class"] in ERROR_CLASSES, data["error"]
    assert data["attempts"] == 0
    assert_feedback(data)
    assert shop.requests() == []
    assert shop.state()["counts"]["reservations"] == 0


def test_it_runs_a_call_whose_dependency_succeeded(
    api: APIClient, run: dict[str, Any], shop: Shop
) -> None:
    call(api, step_index=0, tool="query_stock", args={"sku": "A12"}, tool_call_id="tc-1")

    data = call(
        api,
        step_index=1,
        tool="reserve_stock",
        args={"sku": "A12", "qty": 1},
        depends_on=["tc-1"],
    )

    assert data["status"] == "succeeded", data
    assert len(shop.requests(RESERVE)) == 1


def test_it_refuses_a_dependency_from_another_run(
    api: APIClient, run: dict[str, Any], shop: Shop
) -> None:
    create_run(api, "r-2")
    post_call(api, "r-2", step_index=0, tool="query_stock", args={"sku": "A12"}, tool_call_id="x")

    response = post_call(
        api, "r-1", step_index=0, tool="query_stock", args={"sku": "A12"}, depends_on=["x"]
    )

    assert_problem(response, 400)
    assert not ToolCall.objects.filter(run__run_id="r-1").exists()


def test_it_gets_the_same_call(api: APIClient, run: dict[str, Any], shop: Shop) -> None:
    posted = call(api, step_index=0, tool="query_stock", args={"sku": "A12"})

    response = api.get(f"/api/v1/calls/{posted['call_id']}")

    assert response.status_code == 200, response.content
    assert body(response) == posted
    assert len(shop.requests(STOCK)) == 1


def test_it_gets_a_call_with_a_wait(api: APIClient, run: dict[str, Any], shop: Shop) -> None:
    posted = call(api, step_index=0, tool="query_stock", args={"sku": "A12"})

    response = api.get(f"/api/v1/calls/{posted['call_id']}?wait=5")

    assert response.status_code == 200, response.content
    assert body(response)["status"] == "succeeded"


@pytest.mark.parametrize("wait", ["31", "abc", "-1", "nan"])
def test_it_rejects_a_bad_wait_on_get(
    api: APIClient, run: dict[str, Any], shop: Shop, wait: str
) -> None:
    posted = call(api, step_index=0, tool="query_stock", args={"sku": "A12"})

    response = api.get(f"/api/v1/calls/{posted['call_id']}?wait={wait}")

    problem = assert_problem(response, 400)
    assert "wait" in problem["detail"]


def test_it_records_the_call_in_the_run(api: APIClient, run: dict[str, Any], shop: Shop) -> None:
    ok = call(api, step_index=0, tool="query_stock", args={"sku": "A12"}, tool_call_id="t0")
    call(api, step_index=1, tool="create_ordr", args={}, tool_call_id="t1")

    data = body(api.get("/api/v1/runs/r-1"))

    assert [c["call_id"] for c in data["calls"]][0] == ok["call_id"]
    assert [c["tool_call_id"] for c in data["calls"]] == ["t0", "t1"]
    assert data["last_succeeded_tool_call_id"] == "t0"
    assert data["summary"].startswith("Based on partial data")
    assert data["usage"]["attempts"] == 1


def test_it_sends_the_contract_headers(api: APIClient, run: dict[str, Any], shop: Shop) -> None:
    shop.fault(STOCK, fail_next=1, fail_status=503)

    data = call(api, step_index=0, tool="query_stock", args={"sku": "A12"}, tool_call_id="tc-h")

    assert data["status"] == "succeeded", data
    assert data["attempts"] == 2
    sent = [r["headers"] for r in shop.requests(STOCK)]
    assert [h["x-toolops-attempt"] for h in sent] == ["1", "2"]
    assert {h["x-toolops-run-id"] for h in sent} == {"r-1"}
    assert {h["x-toolops-tool-call-id"] for h in sent} == {"tc-h"}
    assert all(h["idempotency-key"] for h in sent)
    parents = set()
    for headers in sent:
        version, trace_id, parent_id, _flags = headers["traceparent"].split("-")
        assert version == "00"
        assert trace_id == run["trace_id"]
        parents.add(parent_id)
    assert len(parents) == 2


def test_it_holds_a_call_that_needs_approval(
    api: APIClient, run: dict[str, Any], shop: Shop
) -> None:
    args = {"sku": "A12", "qty": 1, "amount": "199.00"}

    response = post_call(api, "r-1", step_index=0, tool="create_order", args=args)

    assert response.status_code == 202, response.content
    data = body(response)
    assert data["status"] == "pending_approval"
    approval = data["approval"]
    assert approval is not None
    assert approval["status"] == "pending"
    assert approval["reason"] in ("irreversible", "policy")
    assert approval["url"] == f"/console/approvals/{approval['approval_id']}/"
    assert shop.requests() == []
    assert shop.state()["counts"]["orders"] == 0


def test_it_counts_tokens_up_to_the_limit(api: APIClient, shop: Shop) -> None:
    create_run(api, "r-1", budget={"max_tokens": 100})

    data = call(api, step_index=0, tool="query_stock", args={"sku": "A12"}, tokens=100)

    assert data["status"] == "succeeded", data
    run = body(api.get("/api/v1/runs/r-1"))
    assert run["usage"]["tokens"] == 100
    assert run["status"] == "budget_exhausted"
    later = post_call(api, "r-1", step_index=1, tool="query_stock", args={"sku": "B7"})
    assert_problem(later, 409)
    assert len(shop.requests(STOCK)) == 1


def test_it_does_not_execute_a_call_past_max_tokens(api: APIClient, shop: Shop) -> None:
    create_run(api, "r-1", budget={"max_tokens": 100})

    data = call(api, step_index=0, tool="query_stock", args={"sku": "A12"}, tokens=101)

    assert data["status"] == "failed"
    assert data["error"]["reason"] == "budget_exhausted"
    assert data["attempts"] == 0
    assert shop.requests() == []
    run = Run.objects.get(run_id="r-1")
    assert run.tokens_used == 101
    assert run.status == Run.Status.BUDGET_EXHAUSTED


def test_it_stops_retrying_at_max_attempts(api: APIClient, shop: Shop) -> None:
    create_run(api, "r-1", budget={"max_attempts": 2})
    shop.fault(STOCK, fail_next=5, fail_status=503)

    data = call(api, step_index=0, tool="query_stock", args={"sku": "A12"})

    assert data["status"] == "failed"
    assert data["error"]["reason"] == "budget_exhausted"
    assert data["attempts"] == 2
    assert len(shop.requests(STOCK)) == 2
    assert Run.objects.get(run_id="r-1").status == Run.Status.BUDGET_EXHAUSTED


def test_it_counts_no_tokens_for_a_replay(api: APIClient, shop: Shop) -> None:
    create_run(api, "r-1", budget={"max_tokens": 1000})
    request = {"step_index": 0, "tool": "query_stock", "args": {"sku": "A12"}, "tokens": 300}
    call(api, **request, tool_call_id="tc-t")

    again = call(api, **request, tool_call_id="tc-t")

    assert again["replayed"] is True
    assert Run.objects.get(run_id="r-1").tokens_used == 300


def test_it_sends_the_args_as_given(
    api: APIClient, run: dict[str, Any], shop: Shop, settings: Any
) -> None:
    # Canonical args are for the idempotency key; the downstream gets the args themselves.
    with open(settings.TOOLOPS_TOOLS_FILE, "a") as catalog:
        catalog.write(f"""
[[tool]]
name = "priced_stock"
kind = "read"
url = "{shop.url}/inventory/stock"
params_schema = {{ type = "object", properties = {{ amount = {{ type = "string", format = "decimal" }} }} }}
""")  # noqa: E501
    registry.reset()

    data = call(api, step_index=0, tool="priced_stock", args={"sku": "A12", "amount": "199.00"})

    assert data["status"] == "succeeded", data
    assert shop.requests(STOCK)[0]["body"] == {"sku": "A12", "amount": "199.00"}
