"""The Python transport (toolops/tools/local.py): an exception a tool did not mean to raise
is its code's bug, told to the model as an internal error and kept, whole, for operators;
a ToolError is the tool author's words for the model and reaches it as written."""

from __future__ import annotations

import logging
from decimal import Decimal
from typing import Any

import pytest
from rest_framework.test import APIClient

from toolops.models import Attempt
from toolops.tools.local import ToolError
from toolops.tools.registry import python_tool

pytestmark = pytest.mark.django_db

CUSTOMER = "rita@example.com"


@python_tool(
    name="buggy_total",
    kind="read",
    description="Multiplies a price by a quantity, with a bug.",
    params_schema={"type": "object", "properties": {"qty": {"type": "number"}}},
)
def buggy_total(*, qty: float) -> dict[str, Any]:
    # A bug that quotes what it was working on, as exceptions do.
    if qty < 0:
        raise ValueError(f"no refund for {CUSTOMER}")
    return {"total": str(Decimal("9.50") * qty)}  # TypeError: Decimal * float


@python_tool(
    name="picky_total",
    kind="read",
    description="Refuses what it cannot price.",
    params_schema={"type": "object", "properties": {"sku": {"type": "string"}}},
)
def picky_total(*, sku: str) -> dict[str, Any]:
    raise ToolError(f"no price for {sku}: ask for another SKU")


def call(api: APIClient, tool: str, args: dict[str, Any], step: int = 0) -> dict[str, Any]:
    body = {"step_index": step, "tool": tool, "args": args}
    response = api.post("/api/v1/runs/r-1/calls", body, format="json")
    assert response.status_code == 200, response.content
    return response.json()


@pytest.fixture
def run(api: APIClient) -> str:
    assert api.post("/api/v1/runs", {"run_id": "r-1"}, format="json").status_code == 201
    return "r-1"


def test_a_tools_own_exception_reaches_neither_the_error_nor_the_feedback(
    api: APIClient, run: str, caplog: Any
) -> None:
    with caplog.at_level(logging.ERROR, logger="toolops.tools.local"):
        answer = call(api, "buggy_total", {"qty": 2.5})

    assert (answer["status"], answer["error"]["class"]) == ("failed", "fatal"), answer
    told = answer["feedback"] + " " + answer["error"]["message"]
    for text in ("TypeError", "unsupported operand", "Decimal", "float"):
        assert text not in told, told
    assert "internal error" in answer["feedback"]
    assert "internal error" in answer["error"]["message"]
    # The operators keep the exception: on the attempt (the console) and in the log.
    attempt = Attempt.objects.get()
    assert attempt.error.startswith("TypeError: unsupported operand type(s) for *")
    [record] = [r for r in caplog.records if r.name == "toolops.tools.local"]
    assert record.exc_info is not None and record.exc_info[0] is TypeError
    assert "buggy_total" in record.getMessage()


def test_an_exceptions_customer_data_stays_out_of_the_model_and_redacted_for_operators(
    api: APIClient, run: str
) -> None:
    answer = call(api, "buggy_total", {"qty": -1})

    assert CUSTOMER not in answer["feedback"] + answer["error"]["message"]
    assert CUSTOMER not in Attempt.objects.get().error
    assert Attempt.objects.get().error.startswith("ValueError: no refund for ")


def test_a_tool_error_keeps_the_tool_authors_words(api: APIClient, run: str) -> None:
    answer = call(api, "picky_total", {"sku": "A12"})

    assert answer["status"] == "failed"
    assert answer["error"]["message"] == "no price for A12: ask for another SKU"
    assert "no price for A12: ask for another SKU" in answer["feedback"]
    assert "internal error" not in answer["feedback"]
