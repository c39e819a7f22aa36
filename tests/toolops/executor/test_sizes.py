"""Args no wider than their tool takes (toolops/executor/sizes.py): a schema that closes
an object (`additionalProperties: false`) or bounds it (`maxProperties`, `maxItems`) is
held to that by counting alone, before the schema check and the canonical form, and the
model is told which field and the most it takes. Nothing is sent downstream."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from tests.conftest import Shop
from tests.toolops.executor.helpers import call_ok, start_run, tool_toml
from toolops.executor import sizes

CLOSED = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "sku": {"type": "string"},
        "lines": {"type": "array", "maxItems": 3, "items": {"type": "object", "maxProperties": 2}},
        "tags": {"type": "object", "additionalProperties": {"type": "array", "maxItems": 2}},
    },
}


def test_an_object_closed_by_its_schema_takes_at_most_its_properties() -> None:
    wide = {"sku": "A12", **{f"k{i}": i for i in range(500)}}
    assert sizes.too_wide(wide, CLOSED) == "args have 501 properties; this tool takes at most 3"
    assert sizes.too_wide({"sku": "A12", "lines": [], "tags": {}}, CLOSED) is None


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        ({"lines": [{}] * 4}, "field 'lines' has 4 items; this tool takes at most 3 there"),
        (
            {"lines": [{}, {"a": 1, "b": 2, "c": 3}]},
            "field 'lines.1' has 3 properties; this tool takes at most 2 there",
        ),
        ({"tags": {"x": [1, 2, 3]}}, "field 'tags.x' has 3 items; this tool takes at most 2 there"),
    ],
)
def test_it_follows_the_schema_down_and_names_the_field(args: Any, problem: str) -> None:
    assert sizes.too_wide(args, CLOSED) == problem


def test_max_properties_and_a_closed_object_take_the_smaller() -> None:
    schema = {**CLOSED, "maxProperties": 2}
    assert sizes.too_wide({"sku": "A", "lines": [], "tags": {}}, schema) == (
        "args have 3 properties; this tool takes at most 2"
    )


def test_an_open_schema_bounds_nothing_and_costs_nothing() -> None:
    schema = {"type": "object", "properties": {"sku": {"type": "string"}}}
    assert sizes._plan_of(schema) is None
    assert sizes.too_wide({f"k{i}": i for i in range(900)}, schema) is None


def test_pattern_properties_keep_an_object_open() -> None:
    schema = {"type": "object", "additionalProperties": False, "patternProperties": {"^x": {}}}
    assert sizes.too_wide({"x1": 1, "x2": 2}, schema) is None


def test_a_call_wider_than_its_tool_is_invalid_args_and_nothing_is_sent(
    api: APIClient, catalog: Any, shop: Shop, db: None
) -> None:
    catalog(
        tool_toml(
            name="query_closed",
            kind="read",
            url="{shop}/inventory/query",
            params_schema={
                "type": "object",
                "required": ["sku"],
                "additionalProperties": False,
                "properties": {"sku": {"type": "string"}},
            },
        )
    )
    start_run(api)
    args = {"sku": "A12", **{f"k{i}": i for i in range(900)}}

    body = call_ok(api, step_index=0, tool="query_closed", args=args)

    assert body["status"] == "failed"
    assert body["error"]["reason"] == "invalid_args"
    assert "901 properties; this tool takes at most 1" in body["error"]["message"]
    assert "at most 1" in body["feedback"]
    assert shop.requests("/inventory/query") == []


def test_a_declared_property_is_never_held_to_the_bounds_of_the_others() -> None:
    # Its own schema bounds nothing: `additionalProperties` is for the keys not declared.
    schema = {
        "type": "object",
        "properties": {"tags": {"type": "array"}},
        "additionalProperties": {"type": "array", "maxItems": 2},
    }
    assert sizes.too_wide({"tags": [1, 2, 3]}, schema) is None
    assert sizes.too_wide({"extra": [1, 2, 3]}, schema) == (
        "field 'extra' has 3 items; this tool takes at most 2 there"
    )


def test_pattern_properties_and_prefix_items_are_left_to_the_schema_check() -> None:
    patterned = {
        "type": "object",
        "patternProperties": {"^x": {"type": "array"}},
        "additionalProperties": {"type": "array", "maxItems": 1},
    }
    assert sizes.too_wide({"x1": [1, 2]}, patterned) is None
    prefixed = {"type": "array", "prefixItems": [{"type": "array"}], "items": {"maxItems": 1}}
    assert sizes.too_wide({"a": 1}, {"properties": {"p": prefixed}}) is None
    assert sizes.too_wide({"p": [[1, 2, 3]]}, {"properties": {"p": prefixed}}) is None
