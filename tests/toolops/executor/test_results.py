"""Results that are incomplete: a 2xx that fails the tool's result_schema is `degraded`
and never retried; an `allow_partial` read whose attempts run out is `degraded` and the
calls that depend on it still run; the same failure on a write is `failed`."""

from __future__ import annotations

from typing import Any

from rest_framework.test import APIClient

from tests.conftest import Shop
from toolops.models import Attempt

from .helpers import STOCK_SCHEMA, call_ok, get_run, start_run, tool_toml

STRICT_RESULT = {
    "type": "object",
    "required": ["sku", "available", "warehouse"],
    "properties": {"warehouse": {"type": "string"}},
}


def stock_tool(name: str, **fields: Any) -> str:
    return tool_toml(
        name=name,
        kind="read",
        url="{shop}/inventory/stock",
        timeout_s=2.0,
        backoff_base_s=0.01,
        params_schema=STOCK_SCHEMA,
        **fields,
    )


def test_it_degrades_a_result_that_fails_the_result_schema_without_retrying(
    api: APIClient, shop: Shop, catalog: Any
) -> None:
    catalog(stock_tool("stock_strict", result_schema=STRICT_RESULT))
    start_run(api)

    call = call_ok(api, step_index=0, tool="stock_strict", args={"sku": "A12"})

    assert call["status"] == "degraded"
    assert call["error"]["class"] == "fatal"
    assert call["error"]["reason"] == "result_invalid"
    assert "warehouse" in call["error"]["message"]
    # What came back is kept for the model to use with care.
    assert call["result"] == {"sku": "A12", "available": 50}
    assert call["attempts"] == 1
    assert len(shop.requests("/inventory/stock")) == 1
    run = get_run(api)
    assert run["summary"].startswith("Based on partial data")


def test_it_degrades_an_exhausted_partial_read_and_runs_the_calls_that_depend_on_it(
    api: APIClient, shop: Shop, catalog: Any
) -> None:
    catalog(stock_tool("stock_partial", allow_partial=True, max_attempts=2))
    start_run(api)
    shop.fault("/inventory/stock", fail_next=2, fail_status=503)

    partial = call_ok(
        api, step_index=0, tool="stock_partial", args={"sku": "A12"}, tool_call_id="tc-stock"
    )
    reserve = call_ok(
        api,
        step_index=1,
        tool="reserve_stock",
        args={"sku": "A12", "qty": 1},
        depends_on=["tc-stock"],
    )

    assert partial["status"] == "degraded"
    assert partial["attempts"] == 2
    assert partial["error"]["class"] == "retry"
    assert partial["feedback"]
    assert len(shop.requests("/inventory/stock")) == 2
    assert reserve["status"] == "succeeded"
    assert shop.state()["counts"]["reservations"] == 1
    run = get_run(api)
    assert run["summary"].startswith("Based on partial data")


def test_it_fails_an_exhausted_write_and_skips_the_calls_that_depend_on_it(
    api: APIClient, shop: Shop
) -> None:
    start_run(api)
    shop.fault("/inventory/reservations", fail_next=3, fail_status=503)

    reserve = call_ok(
        api,
        step_index=0,
        tool="reserve_stock",
        args={"sku": "A12", "qty": 1},
        tool_call_id="tc-reserve",
    )
    after = call_ok(
        api, step_index=1, tool="query_stock", args={"sku": "A12"}, depends_on=["tc-reserve"]
    )

    assert reserve["status"] == "failed"
    assert reserve["error"]["class"] == "retry"
    assert reserve["attempts"] == 3
    assert len(shop.requests("/inventory/reservations")) == 3
    assert shop.state()["counts"]["reservations"] == 0
    assert after["status"] == "skipped"
    assert after["error"]["reason"] == "dependency_failed"
    assert after["attempts"] == 0
    assert shop.requests("/inventory/stock") == []
    assert not Attempt.objects.filter(call__call_id=after["call_id"]).exists()
