"""Query before write (DESIGN.md "Idempotency", level 2): for a downstream without
idempotency support, look the business key up first; found → the call succeeds with what
is there and nothing is sent; not found, or the look failing → the write is sent once,
with the downstream's unique index as the backstop."""

from __future__ import annotations

import tomllib
from typing import Any

import pytest
from rest_framework.test import APIClient

from tests.conftest import Shop
from toolops.models import Attempt, IdempotencyRecord, ToolCall, ToolPolicy
from toolops.tools.catalog import CatalogError, parse

from .helpers import CHARGE_SCHEMA, SHOP, call_ok, start_run, tool_toml

ARGS = {"order_id": "ord-qbw", "amount": "42.00"}


def charge_qbw(**fields: Any) -> str:
    """The charge endpoint, looked up with get_charge by order_id before every write."""
    declared: dict[str, Any] = {
        "name": "charge_qbw",
        "kind": "irreversible",
        "url": f"{SHOP}/payments/charges",
        "timeout_s": 2.0,
        "max_attempts": 3,
        "requires_approval": False,
        "client_reference": "client_reference",
        "query": "get_charge",
        "business_key": ["order_id"],
        "query_before_write": True,
        "params_schema": CHARGE_SCHEMA,
    }
    return tool_toml(**{**declared, **fields})


def sent_by_toolops(shop: Shop, path: str) -> list[dict[str, Any]]:
    return [r for r in shop.requests(path) if r["headers"].get("x-toolops-run-id")]


def charge_directly(shop: Shop, order_id: str) -> dict[str, Any]:
    """A charge made outside ToolOps (another channel, or an earlier run)."""
    response = shop.http.post("/payments/charges", json={"order_id": order_id, "amount": "42.00"})
    assert response.status_code == 200, response.text
    return response.json()


def test_it_answers_an_existing_charge_without_sending_the_write(
    api: APIClient, shop: Shop, catalog: Any
) -> None:
    catalog(charge_qbw())
    existing = charge_directly(shop, "ord-qbw")
    start_run(api)

    call = call_ok(api, step_index=2, tool="charge_qbw", args=ARGS)

    assert call["status"] == "succeeded", call
    assert call["result"]["charge_id"] == existing["charge_id"]
    assert call["error"] is None
    assert "already done" in call["feedback"]
    assert "not sent again" in call["feedback"]
    assert call["attempts"] == 0
    # Looked up by order_id; no charge request from ToolOps reached the shop.
    [lookup] = sent_by_toolops(shop, "/payments/charges/lookup")
    assert lookup["body"]["order_id"] == "ord-qbw"
    assert lookup["status"] == 200
    assert sent_by_toolops(shop, "/payments/charges") == []
    assert len(shop.requests("/payments/charges")) == 1  # the direct one
    assert shop.state()["counts"]["charges"] == 1
    row = ToolCall.objects.get(call_id=call["call_id"])
    assert list(Attempt.objects.filter(call=row).values_list("http_status", flat=True)) == [200]
    assert IdempotencyRecord.objects.get(key=row.idempotency_key).state == "recorded"

    again = call_ok(api, step_index=2, tool="charge_qbw", args=ARGS)
    assert again["replayed"] is True
    assert again["call_id"] == call["call_id"]
    assert len(sent_by_toolops(shop, "/payments/charges/lookup")) == 1
    assert sent_by_toolops(shop, "/payments/charges") == []


def test_it_sends_the_write_once_when_the_query_finds_nothing(
    api: APIClient, shop: Shop, catalog: Any
) -> None:
    catalog(charge_qbw())
    start_run(api)

    call = call_ok(api, step_index=2, tool="charge_qbw", args=ARGS)

    assert call["status"] == "succeeded", call
    assert call["attempts"] == 1
    assert "already done" not in call["feedback"]
    [lookup] = sent_by_toolops(shop, "/payments/charges/lookup")
    [sent] = sent_by_toolops(shop, "/payments/charges")
    assert lookup["status"] == 404
    assert lookup["at"] < sent["at"]
    row = ToolCall.objects.get(call_id=call["call_id"])
    assert sent["body"] == {**ARGS, "client_reference": row.client_reference}
    [charge] = shop.state()["charges"]
    assert call["result"]["charge_id"] == charge["charge_id"]


def test_it_still_sends_the_write_when_the_query_fails(
    api: APIClient, shop: Shop, catalog: Any
) -> None:
    catalog(charge_qbw())
    shop.fault("/payments/charges/lookup", fail_next=10, fail_status=500)
    start_run(api)

    call = call_ok(api, step_index=2, tool="charge_qbw", args=ARGS)

    assert call["status"] == "succeeded", call
    lookups = sent_by_toolops(shop, "/payments/charges/lookup")
    assert lookups and all(r["status"] == 500 for r in lookups)
    [sent] = sent_by_toolops(shop, "/payments/charges")
    assert lookups[-1]["at"] < sent["at"]
    assert shop.state()["counts"]["charges"] == 1


def test_the_unique_index_refuses_the_write_when_the_failed_query_missed_a_charge(
    api: APIClient, shop: Shop, catalog: Any
) -> None:
    catalog(charge_qbw())
    existing = charge_directly(shop, "ord-qbw")
    shop.fault("/payments/charges/lookup", fail_next=10, fail_status=500)
    start_run(api)

    call = call_ok(api, step_index=2, tool="charge_qbw", args=ARGS)

    # The look failed, so the write went out; the shop's UNIQUE(order_id) refused it.
    [sent] = sent_by_toolops(shop, "/payments/charges")
    assert sent["status"] == 409
    assert call["status"] == "failed", call
    assert call["error"]["class"] == "fatal"
    assert call["attempts"] == 1
    [charge] = shop.state()["charges"]
    assert charge["charge_id"] == existing["charge_id"]


def test_without_query_before_write_the_write_goes_first(
    api: APIClient, shop: Shop, catalog: Any
) -> None:
    # The same tool with the switch off: no look before the write.
    catalog(charge_qbw(query_before_write=False))
    start_run(api)

    call = call_ok(api, step_index=2, tool="charge_qbw", args=ARGS)

    assert call["status"] == "succeeded", call
    assert sent_by_toolops(shop, "/payments/charges/lookup") == []
    assert len(sent_by_toolops(shop, "/payments/charges")) == 1


def test_an_operator_policy_turns_query_before_write_on_for_a_catalog_tool(
    api: APIClient, shop: Shop
) -> None:
    # The demo's charge has a query but no query_before_write; a ToolPolicy turns it on.
    ToolPolicy.objects.update_or_create(
        tool="charge", defaults={"requires_approval": False, "query_before_write": True}
    )
    existing = charge_directly(shop, "ord-qbw")
    start_run(api)

    call = call_ok(api, step_index=2, tool="charge", args=ARGS)

    assert call["status"] == "succeeded", call
    assert call["result"]["charge_id"] == existing["charge_id"]
    assert len(sent_by_toolops(shop, "/payments/charges/lookup")) == 1
    assert sent_by_toolops(shop, "/payments/charges") == []


# -- the catalog refuses query_before_write where it cannot work -----------------------


def parse_tool(toml: str) -> None:
    lookup = tool_toml(
        name="get_charge",
        kind="read",
        url="http://127.0.0.1:9/lookup",
        params_schema={"type": "object"},
    )
    parse(tomllib.loads(lookup + toml))


@pytest.mark.parametrize(
    "fields",
    [
        {"kind": "read", "query": "get_charge"},
        {"kind": "irreversible"},
        {"kind": "compensable_write", "compensation": {"tool": "get_charge"}},
    ],
    ids=["on a read tool", "on a write without query", "on a compensable write without query"],
)
def test_the_catalog_refuses_query_before_write_where_it_cannot_work(
    fields: dict[str, Any],
) -> None:
    toml = tool_toml(
        name="pay",
        url="http://127.0.0.1:9/pay",
        query_before_write=True,
        params_schema={"type": "object"},
        **fields,
    )

    with pytest.raises(CatalogError) as excinfo:
        parse_tool(toml)

    assert excinfo.value.tool == "pay"
    assert excinfo.value.field == "query_before_write"
    assert "'pay'" in str(excinfo.value) and "'query_before_write'" in str(excinfo.value)


def test_the_catalog_refuses_a_query_before_write_that_is_not_a_bool() -> None:
    toml = tool_toml(
        name="pay",
        kind="irreversible",
        url="http://127.0.0.1:9/pay",
        query="get_charge",
        query_before_write="yes",
        params_schema={"type": "object"},
    )

    with pytest.raises(CatalogError) as excinfo:
        parse_tool(toml)

    assert excinfo.value.field == "query_before_write"


def test_the_catalog_accepts_query_before_write_on_a_write_with_a_query() -> None:
    toml = tool_toml(
        name="pay",
        kind="irreversible",
        url="http://127.0.0.1:9/pay",
        query="get_charge",
        query_before_write=True,
        params_schema={"type": "object"},
    )
    lookup = tool_toml(
        name="get_charge",
        kind="read",
        url="http://127.0.0.1:9/lookup",
        params_schema={"type": "object"},
    )

    [_, pay] = parse(tomllib.loads(lookup + toml))

    assert pay.query_before_write is True
