"""JSON from outside, bounded (API.md "Conventions"): nesting at most 64 deep, finite
numbers, number literals that fit a double, integer literals within Python's 4,300-digit
limit. Every entry that parses JSON it did not write goes through here — the API's body
parser, `args` sent as a string, MCP's `tools/call` arguments and `_meta`, console forms —
so that no input reaches a RecursionError, an infinity or a costly number downstream.

Pure Python, no Django: the checks must cost microseconds on an ordinary body. json's C
scanner does the parsing; the depth is walked only when the text holds more than 64
brackets at all (counting them is C-fast), which an ordinary call body never does."""

from __future__ import annotations

import json
import math
from typing import Any

MAX_DEPTH = 64
INT_MAX_DIGITS = 4300  # Python's default int_max_str_digits: past it int() refuses
_INT_BOUND = 10**INT_MAX_DIGITS

DEEP = f"JSON nested deeper than {MAX_DEPTH} arrays/objects is not accepted"
NOT_FINITE = "NaN and Infinity are not JSON: numbers must be finite"
TOO_BIG = "a number literal that does not fit a double (such as 1e999) is not accepted"
TOO_LONG = f"an integer literal longer than {INT_MAX_DIGITS:,} digits is not accepted"


class JSONBoundError(ValueError):
    """Well-formed enough JSON past one of the bounds; the message names which."""


def loads(text: str) -> Any:
    """Parse JSON text within the bounds. Raises JSONBoundError past them, ValueError
    (json.JSONDecodeError) for text that is not JSON."""
    try:
        value = json.loads(text, parse_constant=_constant, parse_float=_float)
    except RecursionError:
        raise JSONBoundError(DEEP) from None
    except JSONBoundError:
        raise
    except ValueError as exc:
        if "integer string conversion" in str(exc):
            raise JSONBoundError(TOO_LONG) from None
        raise
    if text.count("[") + text.count("{") > MAX_DEPTH:
        check(value)
    return value


def check(value: Any, *, what: str = "") -> None:
    """Hold a tree someone else parsed (the MCP SDK's) to the same bounds: its depth, its
    floats finite and within a double, its integers within the digit limit. Iterative,
    so a deep tree cannot exhaust the stack here."""
    prefix = f"{what}: " if what else ""
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        kind = type(node)
        if kind is dict or kind is list:
            if depth > MAX_DEPTH:
                raise JSONBoundError(prefix + DEEP)
            children = node.values() if kind is dict else node
            stack.extend((child, depth + 1) for child in children)
        elif kind is float and not math.isfinite(node):
            raise JSONBoundError(prefix + NOT_FINITE)
        elif kind is int and not -_INT_BOUND < node < _INT_BOUND:
            raise JSONBoundError(prefix + TOO_LONG)


def _constant(name: str) -> Any:
    raise JSONBoundError(f"{name}: {NOT_FINITE}")


def _float(text: str) -> float:
    number = float(text)
    if number in (math.inf, -math.inf):
        raise JSONBoundError(f"{text[:40]}: {TOO_BIG}")
    return number
