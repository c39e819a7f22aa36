"""Python tools registered in code run through the same executor as HTTP tools."""

from __future__ import annotations

from typing import Any

import pytest

from toolops.models import ToolCall
from toolops.tools import registry
from toolops.tools.local import ToolError
from toolops.tools.registry import python_tool

pytestmark = pytest.mark.django_db

FLAKY_CALLS: list[int] = []


@python_tool(
    name="flaky_lookup",
    kind="read",
    description="Fails with a retryable error twice, then answers.",
    params_schema={"type": "object", "properties": {"q": {"type": "string"}}},
    backoff_base_s=0.01,
)
def flaky_lookup(*, q: str = "") -> dict[str, Any]:
    FLAKY_CALLS.append(1)
    if len(FLAKY_CALLS) < 3:
        raise ToolError("index warming up", retryable=True)
    return {"q": q, "hits": 1}


@python_tool(
    name="broken_tool",
    kind="read",
    description="Has a bug.",
    params_schema={"type": "object"},
)
def broken_tool() -> dict[str, Any]:
    raise KeyError("oops")


def new_run(api: Any, run_id: str = "r-py") -> None:
    assert api.post("/api/v1/runs", {"run_id": run_id}, format="json").status_code == 201


def call(api: Any, tool: str, args: dict[str, Any], step: int = 0) -> dict[str, Any]:
    response = api.post(
        "/api/v1/runs/r-py/calls", {"step_index": step, "tool": tool, "args": args}, format="json"
    )
    assert response.status_code == 200, response.content
    return response.json()


def test_it_runs_a_python_tool_with_normalised_args(api: Any) -> None:
    registry.reset()
    new_run(api)
    body = call(api, "quote_total", {"unit_price": 19.9, "qty": "3", "tax_rate": 0.1})
    assert body["status"] == "succeeded"
    assert body["result"] == {"subtotal": "59.70", "tax": "5.97", "total": "65.67"}
    stored = ToolCall.objects.get(call_id=body["call_id"])
    # Made to fit the schema: the number became a decimal string, the quoted integer a number.
    assert stored.args == {"unit_price": "19.9", "qty": 3, "tax_rate": 0.1}


def test_it_retries_a_retryable_python_error(api: Any) -> None:
    FLAKY_CALLS.clear()
    new_run(api)
    body = call(api, "flaky_lookup", {"q": "x"})
    assert body["status"] == "succeeded"
    assert body["attempts"] == 3
    assert len(FLAKY_CALLS) == 3


def test_it_fails_a_buggy_python_tool_once_without_a_stack_trace(api: Any) -> None:
    new_run(api)
    body = call(api, "broken_tool", {})
    assert body["status"] == "failed"
    assert body["error"]["class"] == "fatal"
    assert body["attempts"] == 1
    assert "Traceback" not in body["feedback"]
    assert len(body["feedback"]) <= 400


def test_it_rejects_args_that_fail_the_python_tools_schema(api: Any) -> None:
    new_run(api)
    body = call(api, "quote_total", {"unit_price": "abc", "qty": 1})
    assert body["status"] == "failed"
    assert body["error"]["reason"] == "invalid_args"
    assert "unit_price" in body["feedback"]
