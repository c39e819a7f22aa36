"""A call's title and facts from the catalog's `summary` and `display` (tools/facts.py)."""

from __future__ import annotations

from typing import Any

import pytest

from toolops.tools.catalog import CatalogError, parse
from toolops.tools.facts import facts, title

CHARGE = {
    "name": "charge",
    "kind": "irreversible",
    "url": "http://127.0.0.1:9/charges",
    "params_schema": {"type": "object"},
    "redact": ["card_holder"],
    "summary": "Charge {amount} {currency} to {customer} for order {order_id}",
    "display": ["amount", "currency", "card_holder", "charge_id"],
    "searchable": ["order_id", "charge_id", "email"],
}


def _spec(**changes: Any) -> Any:
    return parse({"tool": [{**CHARGE, **changes}]})[0]


def test_the_title_fills_the_summary_from_the_args_then_the_result() -> None:
    spec = _spec()
    args = {"amount": "89.00", "currency": "EUR", "customer": "Ann Lee", "order_id": "ord_1"}

    assert title(spec, args, {"charge_id": "ch_1"}) == (
        "Charge 89.00 EUR to Ann Lee for order ord_1"
    )
    assert spec.searchable == ("order_id", "charge_id", "email")


def test_the_title_redacts_and_marks_a_missing_field() -> None:
    spec = _spec(summary="Charge {amount} to {customer}")

    shown = title(spec, {"amount": "5.00", "customer": "ann@example.com"})
    assert shown == "Charge 5.00 to [redacted email]"
    assert title(spec, {"amount": "5.00"}) == "Charge 5.00 to —"


def test_facts_follow_display_order_redacted_and_skip_absent_fields() -> None:
    spec = _spec()

    shown = facts(spec, {"amount": "89.00", "card_holder": "Ann Lee"}, {"charge_id": "ch_1"})
    assert shown == [("Amount", "89.00"), ("Card holder", "[redacted]"), ("Charge id", "ch_1")]


def test_without_a_summary_the_title_is_the_tool_and_its_first_fact() -> None:
    assert title(_spec(summary=""), {"amount": "3.00"}) == "charge · Amount 3.00"
    assert title(None, {}, tool="gone") == "gone"


@pytest.mark.parametrize(
    ("field", "value", "problem"),
    [
        ("summary", 7, "must be one line of text"),
        ("summary", "Charge {amount", "expected '}' before end of string"),
        ("summary", "Charge {amount!r}", "may not carry a conversion"),
        ("summary", "Charge {}", "must name a field"),
        ("summary", "Charge {$.args.amount}", "is not a field path"),
        ("display", "amount", "must be a list of field paths"),
        ("searchable", ["order id"], "is not a field path"),
    ],
)
def test_a_bad_summary_display_or_searchable_names_the_tool_and_field(
    field: str, value: Any, problem: str
) -> None:
    with pytest.raises(CatalogError) as refused:
        _spec(**{field: value})

    assert refused.value.tool == "charge" and refused.value.field.startswith(field)
    assert problem in str(refused.value)
