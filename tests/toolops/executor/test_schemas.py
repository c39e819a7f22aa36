"""The args and result check: the Rust engine answers "valid", python-jsonschema words
every refusal, and the verdicts are the ones the model always had."""

from __future__ import annotations

from typing import Any

from toolops.executor.schemas import schema_errors, where

CHARGE = {
    "type": "object",
    "properties": {
        "amount": {"type": "string", "format": "decimal"},
        "currency": {"type": "string", "enum": ["EUR", "USD"]},
        "qty": {"type": "integer", "minimum": 1},
        "sku": {"type": "string", "pattern": "^[A-Z][0-9]+$"},
    },
    "required": ["amount"],
    "additionalProperties": False,
}


def messages(instance: Any, **kwargs: Any) -> list[str]:
    return [e.message for e in schema_errors(CHARGE, instance, **kwargs)]


def test_valid_args_have_no_errors() -> None:
    assert schema_errors(CHARGE, {"amount": "12.50", "currency": "EUR", "qty": 2}) == []


def test_a_refusal_is_worded_by_python_jsonschema() -> None:
    [error] = schema_errors(CHARGE, {"amount": "1", "qty": 0})
    assert (where(error), error.message) == ("qty", "0 is less than the minimum of 1")
    assert messages({"qty": 1}) == ["'amount' is a required property"]
    assert messages({"amount": "1", "note": "x"}) == [
        "Additional properties are not allowed ('note' was unexpected)"
    ]


def test_the_decimal_format_is_checked_by_both_engines() -> None:
    assert messages({"amount": "abc"}) == ["'abc' is not a 'decimal'"]
    # Past ToolOps' bounds: refused before Decimal would have to work with it.
    assert messages({"amount": "1e999999999"}) == ["'1e999999999' is not a 'decimal'"]
    assert messages({"amount": "-0.0001"}) == []


def test_formats_are_not_checked_when_switched_off() -> None:
    assert messages({"amount": "abc"}, formats=False) == []


def test_where_the_engines_differ_the_verdict_stays_python_jsonschemas() -> None:
    # Python's `$` matches before a final newline; ECMA's (the Rust engine's) does not.
    assert messages({"amount": "1", "sku": "A1\n"}) == []
    assert messages({"amount": "1", "sku": "a1"}) == ["'a1' does not match '^[A-Z][0-9]+$'"]


def test_each_schema_is_judged_by_its_own_validators() -> None:
    schema: dict[str, Any] = {"type": "object", "properties": {"n": {"type": "integer"}}}
    assert schema_errors(schema, {"n": "x"})
    other = {"type": "object"}
    assert schema_errors(other, {"n": "x"}) == []
