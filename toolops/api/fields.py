"""Serializer fields for the numbers the API takes: a number is a JSON number, held to the
bound of the column it is stored in (bounds.py).

DRF's IntegerField and FloatField read their input with int() and float(), which take
much more than JSON numbers: `true` is 1 to float(), "1_0" is 10, "١" (an Arabic-Indic
digit) is 1, " 5" and "5\\n" are 5, and "nan" is a float that every range check lets
through. A body's number arrives as a JSON number, so anything else is refused, naming
the field; a query string's number is ASCII decimal text."""

from __future__ import annotations

import re
from typing import Any

from rest_framework import serializers


def _kind(data: Any) -> str:
    if isinstance(data, bool):
        return "a boolean"
    if isinstance(data, str):
        return "a string"
    names: dict[type, str] = {list: "an array", dict: "an object"}
    return names.get(type(data), type(data).__name__)


class WholeNumberField(serializers.IntegerField):
    """An integer, sent as a JSON number. A whole float (2.0, 1e2) is that integer, as
    JSON Schema counts it, and is then held to the same bound: DRF took 1e2 as 100 but
    refused 1e16 as "not a valid integer", from the way str() writes them."""

    default_error_messages = {
        "not_number": "must be an integer (a JSON number such as 3), not {kind}",
        "fraction": "must be a whole number",
    }

    def to_internal_value(self, data: Any) -> int:
        if type(data) is int:
            return data
        if type(data) is not float:
            self.fail("not_number", kind=_kind(data))
        # Finite: the body's parser refuses NaN and Infinity (and inf.is_integer() is False).
        if not data.is_integer():
            self.fail("fraction")
        return int(data)


class SecondsField(serializers.FloatField):
    """A number of seconds, sent as a JSON number (not `true`, not "5")."""

    default_error_messages = {
        "not_number": "must be a number of seconds (a JSON number such as 2.5), not {kind}",
    }

    def to_internal_value(self, data: Any) -> float:
        if type(data) not in (int, float):
            self.fail("not_number", kind=_kind(data))
        return super().to_internal_value(data)


class QuerySecondsField(serializers.FloatField):
    """A number of seconds in a query string (`?wait=2.5`): ASCII digits, with a decimal
    point between digits, and nothing else — no sign, space, underscore, exponent, other
    script's digits, "nan" or "inf", all of which float() reads."""

    TEXT = re.compile(r"[0-9]+(?:\.[0-9]+)?")
    default_error_messages = {
        "not_decimal": "must be a number of seconds written in ASCII digits, such as 5 or 2.5",
    }

    def to_internal_value(self, data: Any) -> float:
        if not isinstance(data, str) or self.TEXT.fullmatch(data) is None:
            self.fail("not_decimal")
        return super().to_internal_value(data)
