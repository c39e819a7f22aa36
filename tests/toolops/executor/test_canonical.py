"""Canonical args: model jitter (key order, white space, 199 vs "199.0" vs "199.00") must
not change the idempotency key, so it must not reach the downstream twice."""

from __future__ import annotations

import json
import math
from decimal import Decimal
from typing import Any

import pytest
from rest_framework.test import APIClient

from tests.conftest import Shop
from toolops.executor.canonical import ArgsError, canonical_json, normalize, parse_args
from toolops.executor.keys import client_reference, idempotency_key
from toolops.models import IdempotencyRecord, ToolCall

from .helpers import allow_without_approval, call_ok, post_call, start_run


def order(**changes: Any) -> dict[str, Any]:
    return {"sku": "A12", "qty": 1, "amount": "199.00", **changes}


ORDER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["sku", "qty", "amount"],
    "properties": {
        "sku": {"type": "string"},
        "qty": {"type": "integer", "minimum": 1},
        "amount": {"type": "string", "format": "decimal"},
    },
}


# -- through the API --------------------------------------------------------------------


@pytest.mark.parametrize(
    "variants",
    [
        pytest.param(
            [
                {"sku": "A12", "qty": 1, "amount": "199.00"},
                {"amount": "199.00", "qty": 1, "sku": "A12"},
                {"qty": 1, "amount": "199.00", "sku": "  A12 "},
            ],
            id="key-order-and-white-space",
        ),
        pytest.param(
            [
                {"sku": "A12", "qty": 1, "amount": "199.0"},
                {"sku": "A12", "qty": 1, "amount": 199},
                {"sku": "A12", "qty": 1, "amount": "199.00"},
                {"sku": "A12", "qty": 1, "amount": 199.0},
                {"sku": "A12", "qty": 1, "amount": " 199 "},
            ],
            id="decimal-amount-forms",
        ),
        pytest.param(
            [
                {"sku": "A12", "qty": 1, "amount": "199.00"},
                '{"qty": "1", "sku": "A12", "amount": 199.0}',
            ],
            id="args-as-json-string-with-quoted-integer",
        ),
    ],
)
def test_it_sends_one_order_for_args_that_differ_only_in_form(
    api: APIClient, shop: Shop, variants: list[Any]
) -> None:
    allow_without_approval("create_order")
    start_run(api)

    answers = [call_ok(api, step_index=3, tool="create_order", args=args) for args in variants]

    assert [a["status"] for a in answers] == ["succeeded"] * len(variants)
    assert len({a["call_id"] for a in answers}) == 1
    assert [a["replayed"] for a in answers] == [False] + [True] * (len(variants) - 1)
    assert len({a["result"]["order_id"] for a in answers}) == 1
    assert len(shop.requests("/orders")) == 1
    assert shop.state()["counts"]["orders"] == 1
    assert ToolCall.objects.count() == 1
    assert IdempotencyRecord.objects.count() == 1


def test_it_sends_a_second_order_when_the_amount_really_differs(api: APIClient, shop: Shop) -> None:
    allow_without_approval("create_order")
    start_run(api)

    first = call_ok(api, step_index=3, tool="create_order", args=order())
    other = call_ok(api, step_index=3, tool="create_order", args=order(amount="199.01"))

    assert other["replayed"] is False
    assert other["call_id"] != first["call_id"]
    assert len(shop.requests("/orders")) == 2
    refs = [r["body"]["client_reference"] for r in shop.requests("/orders")]
    assert refs[0] != refs[1]


def test_it_fails_args_that_cannot_be_canonicalised_without_calling_the_downstream(
    api: APIClient, shop: Shop
) -> None:
    allow_without_approval("create_order")
    start_run(api)

    huge = call_ok(api, step_index=1, tool="create_order", args=order(qty=10**30))
    nan_amount = call_ok(api, step_index=3, tool="create_order", args=order(amount="NaN"))
    past = call_ok(api, step_index=4, tool="create_order", args=order(amount="1e400"))
    # NaN in a string of args is JSON past the bounds, as in the body: a 400 (API.md).
    nan_text = '{"sku": "A12", "qty": NaN, "amount": "1"}'
    nan = post_call(api, "r-1", step_index=2, tool="create_order", args=nan_text)
    assert nan.status_code == 400, nan.content
    assert "NaN" in nan.json()["detail"]

    for answer in (huge, nan_amount, past):
        assert answer["status"] == "failed", answer
        assert answer["error"]["class"] == "fatal"
        assert answer["error"]["reason"] == "invalid_args"
        assert answer["feedback"]
        assert "Traceback" not in answer["feedback"]
    assert shop.requests("/orders") == []
    assert IdempotencyRecord.objects.count() == 0


def test_it_sends_long_amounts_exactly_and_keeps_them_apart(api: APIClient, shop: Shop) -> None:
    allow_without_approval("create_order")
    start_run(api)
    long = "12345678901234567890.123456789"
    neighbour = "12345678901234567890.123456788"

    first = call_ok(api, step_index=1, tool="create_order", args=order(amount=long))
    second = call_ok(api, step_index=1, tool="create_order", args=order(amount=neighbour))

    assert first["status"] == second["status"] == "succeeded"
    assert second["replayed"] is False, "a different amount was answered as a replay"
    sent = [Decimal(str(r["body"]["amount"])) for r in shop.requests("/orders")]
    assert sent == [Decimal(long), Decimal(neighbour)]


def test_it_answers_a_huge_decimal_as_a_tool_outcome_not_a_server_error(
    api: APIClient, shop: Shop
) -> None:
    # quote_total (a Python tool) quantises unit_price to 2 places.
    start_run(api)
    api.raise_request_exception = False

    response = api.post(
        "/api/v1/runs/r-1/calls",
        {"step_index": 0, "tool": "quote_total", "args": {"unit_price": "1e30", "qty": 1}},
        format="json",
    )

    assert response.status_code == 200, response.content[:300]
    assert response.json()["status"] in ("succeeded", "failed")
    if response.json()["status"] == "failed":
        assert response.json()["error"]["reason"] == "invalid_args"


# -- toolops.executor.canonical ---------------------------------------------------------


@pytest.mark.parametrize("amount", ["199", "199.0", "199.00", 199, 199.0, " 199.00 ", "1.99e2"])
def test_it_puts_decimal_amounts_in_one_form(amount: Any) -> None:
    assert normalize({"amount": amount}, ORDER_SCHEMA) == {"amount": "199"}


def test_it_keeps_decimal_fractions_exact() -> None:
    assert normalize({"amount": "0.10"}, ORDER_SCHEMA) == {"amount": "0.1"}
    assert normalize({"amount": 0.1}, ORDER_SCHEMA) == {"amount": "0.1"}
    assert normalize({"amount": "199.50"}, ORDER_SCHEMA) == normalize(
        {"amount": 199.5}, ORDER_SCHEMA
    )


@pytest.mark.parametrize(
    ("schema", "value", "expected"),
    [
        ({"type": "string", "format": "decimal", "x-decimal-places": 2}, "199", "199.00"),
        ({"type": "string", "format": "decimal", "x-decimal-places": 2}, 199.5, "199.50"),
        ({"type": "string", "format": "decimal", "x-decimal-places": 2}, "199.000", "199.00"),
        ({"type": "string", "format": "decimal", "x-decimal-places": 0}, "7.0", "7"),
        ({"type": "string", "format": "decimal", "multipleOf": 0.01}, "5", "5.00"),
        ({"type": "string", "format": "decimal", "multipleOf": 0.01}, 5.1, "5.10"),
        ({"type": "string", "format": "decimal", "multipleOf": 0.5}, "2", "2.0"),
        ({"type": "string", "format": "decimal", "multipleOf": 1}, "3.0", "3"),
    ],
)
def test_it_quantises_decimals_to_the_schema_precision(
    schema: dict[str, Any], value: Any, expected: str
) -> None:
    root = {"type": "object", "properties": {"price": schema}}
    assert normalize({"price": value}, root) == {"price": expected}


@pytest.mark.parametrize(
    ("value", "expected"), [("2", 2), (" 2 ", 2), (2.0, 2), (2, 2), ("2.0", 2)]
)
def test_it_coerces_integer_strings_for_integer_fields(value: Any, expected: int) -> None:
    normalized = normalize({"qty": value}, ORDER_SCHEMA)
    assert normalized == {"qty": expected}
    assert type(normalized["qty"]) is int


def test_it_coerces_number_strings_for_number_fields() -> None:
    schema = {"type": "object", "properties": {"rate": {"type": "number"}}}
    assert normalize({"rate": "0.25"}, schema) == {"rate": 0.25}
    assert canonical_json(normalize({"rate": "1.0"}, schema)) == canonical_json({"rate": 1})


def test_it_leaves_strings_that_are_not_numbers_for_the_schema_to_judge() -> None:
    assert normalize({"qty": "two"}, ORDER_SCHEMA) == {"qty": "two"}
    assert normalize({"amount": "lots"}, ORDER_SCHEMA) == {"amount": "lots"}
    # A field the schema types as a string is not turned into a number.
    assert normalize({"sku": " 0012 "}, ORDER_SCHEMA) == {"sku": "0012"}


def test_it_strips_strings_in_nested_objects_and_arrays() -> None:
    schema = {
        "type": "object",
        "properties": {
            "lines": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "qty": {"type": "integer"},
                        "price": {"type": "string", "format": "decimal"},
                    },
                },
            }
        },
    }
    value = {"lines": [{"qty": "2", "price": "9.90", "note": "  gift "}]}
    assert normalize(value, schema) == {"lines": [{"qty": 2, "price": "9.9", "note": "gift"}]}


def test_it_sorts_nested_keys_and_drops_white_space() -> None:
    value = {"b": {"d": 1, "c": [{"z": 1, "y": "x"}]}, "a": True, "é": None}
    assert canonical_json(value) == b'{"a":true,"b":{"c":[{"y":"x","z":1}],"d":1},"\xc3\xa9":null}'
    reordered = {"é": None, "a": True, "b": {"c": [{"y": "x", "z": 1}], "d": 1}}
    assert canonical_json(reordered) == canonical_json(value)


def test_it_gives_each_number_one_representation() -> None:
    assert canonical_json({"n": 1.0}) == canonical_json({"n": 1}) == b'{"n":1}'
    assert canonical_json(normalize({"n": 1.0}, None)) == b'{"n":1}'


@pytest.mark.parametrize(
    "value",
    [{"x": math.nan}, {"x": math.inf}, {"x": -math.inf}],
    ids=["nan", "inf", "-inf"],
)
def test_it_rejects_values_without_a_canonical_form_as_args_error(value: Any) -> None:
    with pytest.raises(ArgsError) as caught:
        canonical_json(normalize(value, None))
    assert caught.value.message
    assert caught.value.field == "args"


@pytest.mark.parametrize(
    "raw",
    ['{"x": NaN}', '{"x": Infinity}', '{"x": -Infinity}', "{not json", "[1, 2]", "3", 7, None],
)
def test_it_rejects_args_that_are_not_a_json_object(raw: Any) -> None:
    with pytest.raises(ArgsError):
        parse_args(raw)


def test_it_parses_args_sent_as_a_json_string() -> None:
    assert parse_args('{"sku": "A12", "qty": 1}') == {"sku": "A12", "qty": 1}
    assert parse_args({"sku": "A12"}) == {"sku": "A12"}


def test_it_does_not_lose_precision_on_long_decimals() -> None:
    # 29 significant digits: more than decimal's default context keeps.
    long = "12345678901234567890.123456789"
    assert normalize({"amount": long}, ORDER_SCHEMA) == {"amount": long}
    neighbour = "12345678901234567890.123456788"
    assert normalize({"amount": neighbour}, ORDER_SCHEMA) != normalize(
        {"amount": long}, ORDER_SCHEMA
    )


def test_it_quantises_huge_decimals_exactly_or_rejects_them_as_args_error() -> None:
    price = {"type": "string", "format": "decimal", "x-decimal-places": 2}
    schema = {"type": "object", "properties": {"price": price}}
    try:
        normalized = normalize({"price": "1e30"}, schema)
    except ArgsError:
        return  # rejected cleanly
    assert normalized == {"price": "1" + "0" * 30 + ".00"}


# -- toolops.executor.keys -------------------------------------------------------------


def _key(
    run_id: str = "7", step_index: int = 4, tool: str = "create_order", args: Any = None
) -> str:
    args = {"sku": "A12", "qty": 1, "amount": "199"} if args is None else args
    return idempotency_key(
        run_id=run_id, step_index=step_index, tool=tool, canonical_args=canonical_json(args)
    )


def test_it_makes_the_same_key_for_the_same_call() -> None:
    assert _key() == _key()
    assert len(_key()) == 64
    assert int(_key(), 16) >= 0  # hex


@pytest.mark.parametrize(
    "other",
    [
        {"run_id": "8"},
        {"step_index": 5},
        {"tool": "charge"},
        {"args": {"sku": "A12", "qty": 2, "amount": "199"}},
    ],
    ids=["run", "step", "tool", "args"],
)
def test_it_makes_a_different_key_when_run_step_tool_or_args_differ(other: dict[str, Any]) -> None:
    assert _key(**other) != _key()


def test_it_keeps_the_parts_of_the_key_apart() -> None:
    # "1" + "23" must not collide with "12" + "3" once the parts are joined.
    assert _key(run_id="1", step_index=23) != _key(run_id="12", step_index=3)


def test_it_derives_the_client_reference_from_the_key() -> None:
    key = _key()
    assert client_reference(key) == client_reference(key)
    assert client_reference(key) != client_reference(_key(step_index=5))
    assert 0 < len(client_reference(key)) <= 64


# -- bounds (API.md: past 1e308 or an exponent past ±1000 is invalid_args naming the field)

BOUNDED_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "qty": {"type": "integer"},
        "price": {"type": "string", "format": "decimal", "x-decimal-places": 2},
        "amount": {"type": "string", "format": "decimal"},
        "lines": {
            "type": "array",
            "items": {"type": "object", "properties": {"qty": {"type": "integer"}}},
        },
    },
}


@pytest.mark.parametrize(
    ("args", "field"),
    [
        ({"qty": "1e1000000"}, "qty"),
        ({"qty": "1e9999999"}, "qty"),
        ({"price": "1e1000000"}, "price"),
        ({"amount": "1e9999999"}, "amount"),
        ({"amount": "1e-1001"}, "amount"),
        ({"amount": 10**309}, "amount"),
        ({"lines": [{"qty": 1}, {"qty": "2e400"}]}, "lines.1.qty"),
        ({"extra": {"n": 1.5e308}}, "extra.n"),
    ],
)
def test_it_refuses_a_number_past_the_bounds_naming_its_field(
    args: dict[str, Any], field: str
) -> None:
    with pytest.raises(ArgsError) as caught:
        normalize(args, BOUNDED_SCHEMA)
    assert caught.value.field == field
    assert f"field {field!r}" in caught.value.message
    # Only made to fit the schema (what the tool would get), it is left as sent.
    assert normalize(args, BOUNDED_SCHEMA, canonical=False) == args


def test_a_schemas_precision_cannot_overflow() -> None:
    schema = {
        "type": "object",
        "properties": {"p": {"type": "string", "format": "decimal", "x-decimal-places": -(10**9)}},
    }
    with pytest.raises(ArgsError) as caught:
        normalize({"p": "12.5"}, schema)
    assert caught.value.field == "p"


def test_args_sent_as_a_string_are_parsed_within_the_bounds() -> None:
    with pytest.raises(ArgsError, match="deeper than 64"):
        parse_args('{"x": ' + "[" * 5000 + "]" * 5000 + "}")
    with pytest.raises(ArgsError, match="does not fit a double"):
        parse_args('{"x": 1e999}')


# -- integers: sent as integers, and only those JSON keeps exact -----------------------


AS_STRING = "; send it as a string"
CHECK_IT = ", and this field takes a number: check it"


@pytest.mark.parametrize(
    ("args", "field", "shown", "advice"),
    [
        ({"x": 10**30}, "x", "1000000000000000000000000000000", AS_STRING),
        ({"nested": [{"x": -(2**60)}]}, "nested.0.x", "-1152921504606846976", AS_STRING),
        ({"order": {"n": 2**53 + 1}}, "order.n", "9007199254740993", AS_STRING),
        # Where the schema wants a number, a string would be refused too.
        ({"qty": 2**53}, "qty", "9007199254740992", CHECK_IT),
        ({"qty": "9007199254740993"}, "qty", "'9007199254740993'", CHECK_IT),
        ({"qty": 1e20}, "qty", "1e+20", CHECK_IT),  # a whole float where an integer is wanted
        ({"lines": [{"qty": -(2**53)}]}, "lines.0.qty", "-9007199254740992", CHECK_IT),
    ],
)
def test_it_refuses_an_integer_past_2_to_the_53_naming_its_field(
    args: dict[str, Any], field: str, shown: str, advice: str
) -> None:
    # rfc8785 refused them, as I-JSON does, but as "args cannot be canonicalised".
    with pytest.raises(ArgsError) as caught:
        normalize(args, BOUNDED_SCHEMA)
    assert caught.value.field == field
    assert caught.value.message == (
        f"field {field!r}: {shown} is past ±2^53, the largest integer JSON keeps exact{advice}"
    )
    normalize(args, BOUNDED_SCHEMA, canonical=False)  # the canonical form is the judge


def test_it_keeps_the_integers_json_keeps_exact() -> None:
    exact = {"qty": 2**53 - 1, "extra": -(2**53 - 1)}
    assert canonical_json(normalize(exact, BOUNDED_SCHEMA)) == canonical_json(exact)
    # A double past 2**53 where a number is wanted is a double like any other.
    schema = {"type": "object", "properties": {"rate": {"type": "number"}}}
    assert normalize({"rate": 1e20}, schema) == {"rate": 1e20}
    assert normalize({"n": 1e300}, None) == {"n": 1e300}


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ({"qty": 2.0}, {"qty": 2}),
        ({"qty": 1e2}, {"qty": 100}),
        ({"lines": [{"qty": 3.0}, {"qty": 4}]}, {"lines": [{"qty": 3}, {"qty": 4}]}),
        ({"maybe": 5.0}, {"maybe": 5}),  # "type": ["integer", "null"]
    ],
)
def test_it_sends_a_whole_float_where_an_integer_is_wanted_as_the_integer(
    args: dict[str, Any], expected: dict[str, Any]
) -> None:
    properties = {**BOUNDED_SCHEMA["properties"], "maybe": {"type": ["integer", "null"]}}
    sent = normalize(args, {**BOUNDED_SCHEMA, "properties": properties}, canonical=False)

    assert json.dumps(sent) == json.dumps(expected)  # `2`, not `2.0`


def test_it_leaves_other_floats_as_the_model_sent_them() -> None:
    schema = {
        "type": "object",
        "properties": {"rate": {"type": "number"}, "qty": {"type": "integer"}},
    }
    sent = normalize({"rate": 2.0, "free": 3.0, "qty": 2.5}, schema, canonical=False)
    assert sent == {"rate": 2.0, "free": 3.0, "qty": 2.5}
    assert [type(v) for v in sent.values()] == [float, float, float]
