"""Numbers written as strings are judged from their text before Decimal sees them: past
1e308 in magnitude or ±1000 in exponent they are refused at once, however long the
exponent; within the bounds they are the Decimal they write."""

from __future__ import annotations

from decimal import Decimal

import pytest

from toolops.executor.numbers import NumberBoundError, decimal_of, in_bounds


@pytest.mark.parametrize(
    ("text", "number"),
    [
        ("12.50", Decimal("12.50")),
        (" 7 ", Decimal(7)),
        ("-0.5", Decimal("-0.5")),
        (".5", Decimal("0.5")),
        ("5.", Decimal(5)),
        ("1e308", Decimal("1e308")),
        ("1e-1000", Decimal("1e-1000")),
        ("0e-1000", Decimal(0)),
        ("1" * 309 + "e-1", Decimal("1" * 309 + "e-1")),
        ("1e+0000000000000000000000002", Decimal(100)),
    ],
)
def test_it_reads_a_number_within_the_bounds(text: str, number: Decimal) -> None:
    assert decimal_of(text) == number


@pytest.mark.parametrize("text", ["abc", "", "1_000", "Infinity", "NaN", "١٢", "1e", "--1"])
def test_it_reads_no_number_from_what_writes_none(text: str) -> None:
    assert decimal_of(text) is None


@pytest.mark.parametrize(
    "text",
    [
        "1e309",
        "9.9e308",
        "1" * 310,
        "1e1001",
        "1e-1001",
        "0e-1001",
        "0." + "0" * 1000 + "1",
        "1e1000000",
        "1e9999999",
        "1e" + "9" * 100_000,
        "1." + "1" * 100_000,
    ],
)
def test_it_refuses_a_number_past_the_bounds_at_once(text: str) -> None:
    with pytest.raises(NumberBoundError):
        decimal_of(text)


def test_it_bounds_json_numbers_by_magnitude() -> None:
    assert in_bounds(10**308) and in_bounds(1e308) and in_bounds(-(10**308))
    assert not in_bounds(10**308 + 1)
    assert not in_bounds(-1.5e308)
    assert in_bounds(True) and in_bounds("1e999")
