"""Canonical args: what makes model jitter (key order, white space, 199 vs "199.00")
produce one idempotency key. RFC 8785 serialisation comes from the `rfc8785` library;
the schema-aware normalisation before it is ours. Numbers are held to API.md's bounds
(toolops.executor.numbers) before any conversion, so that no args cost more to make
canonical than to read.

Integers past ±(2**53 - 1) are refused, naming the field: RFC 8785 writes numbers as
I-JSON does (RFC 7493), as doubles, and a double holds no integer past 2**53 exactly, so
neither the key nor any JSON reader downstream could tell 2**53 + 1 from 2**53. A model
that needs such a number (an id, a big amount) sends it as a string."""

from __future__ import annotations

import hashlib
from decimal import Decimal, DecimalException, localcontext
from typing import Any

import rfc8785

from toolops import jsonbound

from .numbers import RULE, NumberBoundError, decimal_of, in_bounds

MAX_DIGITS = 200
# The largest integer a double holds exactly, and so the largest I-JSON (and rfc8785)
# takes: RFC 7493 section 2.2.
EXACT_MAX = 2**53 - 1
PAST_EXACT = "is past ±2^53, the largest integer JSON keeps exact"


class ArgsError(ValueError):
    """Args that cannot be normalised; `field` names where, for the model's feedback."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


class _OutOfBounds(Exception):
    """A value past the bounds, deep in the args; its path is filled in on the way up."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.path: list[str] = []


def parse_args(raw: Any) -> dict[str, Any]:
    """Args arrive as an object, or as a string holding one (OpenAI-style clients)."""
    if isinstance(raw, str):
        try:
            raw = jsonbound.loads(raw)
        except ValueError as exc:
            raise ArgsError("args", f"args is a string but not valid JSON ({exc})") from None
    if not isinstance(raw, dict):
        raise ArgsError("args", f"args must be a JSON object, got {_json_type(raw)}")
    return raw


def normalize(value: Any, schema: dict[str, Any] | None, *, canonical: bool = True) -> Any:
    """Follow the schema to make args comparable.

    canonical=True gives the form the idempotency key is made from: strings stripped,
    decimals in one form (to the schema's precision), numbers without a redundant ".0".
    canonical=False only makes the args fit their schema — a number where a decimal string
    is wanted becomes that string, a quoted number where a number is wanted becomes the
    number, a whole float where an integer is wanted becomes the integer (2.0 → 2: JSON
    Schema counts 2.0 as an integer, and a tool doing integer arithmetic fails on it) —
    and otherwise leaves them as the model sent them: that is what the tool gets.

    A number past API.md's bounds (or a numeric string for an integer, number or decimal
    field), or an integer past ±2**53, is an ArgsError naming its field when canonical;
    otherwise it is left as sent.
    """
    try:
        return _normalize(value, schema, canonical)
    except _OutOfBounds as exc:
        where = ".".join(reversed(exc.path)) or "args"
        raise ArgsError(where, f"field {where!r}: {exc.reason}") from None


def _normalize(value: Any, schema: dict[str, Any] | None, canonical: bool) -> Any:
    schema = schema or {}
    if schema.get("format") == "decimal":
        return _decimal_string(value, schema) if canonical else _decimal_conform(value)
    if isinstance(value, dict):
        props = schema.get("properties", {})
        extra = schema.get("additionalProperties")
        fallback = extra if isinstance(extra, dict) else None
        out = {}
        for k, v in value.items():
            try:
                out[k] = _normalize(v, props.get(k, fallback), canonical)
            except _OutOfBounds as exc:
                exc.path.append(str(k))
                raise
        return out
    if isinstance(value, list):
        items = schema.get("items") if isinstance(schema.get("items"), dict) else None
        out_list = []
        for i, v in enumerate(value):
            try:
                out_list.append(_normalize(v, items, canonical))
            except _OutOfBounds as exc:
                exc.path.append(str(i))
                raise
        return out_list
    if isinstance(value, str):
        # Models often quote numbers: "2" where the schema says integer.
        if schema.get("type") in ("integer", "number") and value.strip():
            number = _bounded(value, canonical)
            if number is not None:
                return _plain_number(_number(number), schema, canonical, written=value)
        return value.strip() if canonical else value
    if type(value) not in (int, float):
        return value  # a boolean or null: the schema judges it
    if not in_bounds(value):
        if canonical:
            raise _OutOfBounds(f"{_shown(value)}: {RULE}")
        return value
    return _plain_number(value, schema, canonical, written=value)


def _plain_number(
    value: int | float, schema: dict[str, Any], canonical: bool, *, written: Any
) -> int | float:
    """A number within the magnitude bound, in its one form: an integer within ±2**53 as
    an int (a whole float too, when canonical or where the schema wants an integer). An
    integer JSON cannot keep exact is refused when canonical."""
    if type(value) is float:
        if not value.is_integer():
            return value
        if abs(value) <= EXACT_MAX:
            return int(value) if canonical or _wants_integer(schema) else value
        if not _wants_integer(schema):
            return value  # a double like 1e300, where any number will do
    elif -EXACT_MAX <= value <= EXACT_MAX:
        return value
    # An int past ±2**53, or a whole float past it where an integer is wanted.
    if not canonical:
        return value
    if schema.get("type") in ("integer", "number") or _wants_integer(schema):
        # "Send it as a string" would only be refused again by the schema.
        raise _OutOfBounds(
            f"{_shown(written)} {PAST_EXACT}, and this field takes a number: check it"
        )
    raise _OutOfBounds(f"{_shown(written)} {PAST_EXACT}; send it as a string")


def _wants_integer(schema: dict[str, Any]) -> bool:
    kind = schema.get("type")
    return kind == "integer" or (isinstance(kind, list) and "integer" in kind)


def canonical_json(value: Any) -> bytes:
    try:
        return rfc8785.dumps(value)
    except rfc8785.CanonicalizationError as exc:
        raise ArgsError("args", f"args cannot be canonicalised: {exc}") from None


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _decimal_conform(value: Any) -> Any:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and in_bounds(value):
        number = _to_decimal(value)
        return value if number is None else f"{number:f}"
    return value


def _decimal_string(value: Any, schema: dict[str, Any]) -> Any:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return value  # the schema validation names the problem
    if not isinstance(value, str) and not in_bounds(value):
        raise _OutOfBounds(f"{_shown(value)}: {RULE}")
    number = _bounded(value, True) if isinstance(value, str) else _to_decimal(value)
    if number is None:
        return value.strip() if isinstance(value, str) else value
    places = _decimal_places(schema)
    # Decimal's default context keeps 28 digits: enough to make two long amounts equal.
    with localcontext(prec=MAX_DIGITS):
        try:
            if places is not None:
                return f"{number.quantize(Decimal(1).scaleb(-places)):f}"
            return f"{number.normalize():f}"
        except DecimalException:  # InvalidOperation past the digits; Overflow on a schema's
            raise _OutOfBounds(f"{_shown(value)} has more than {MAX_DIGITS} digits") from None


def _decimal_places(schema: dict[str, Any]) -> int | None:
    if isinstance(schema.get("x-decimal-places"), int):
        return int(schema["x-decimal-places"])
    step = schema.get("multipleOf")
    if isinstance(step, (int, float)) and step > 0:
        exponent = Decimal(str(step)).normalize().as_tuple().exponent
        return max(0, -int(exponent))
    return None


def _bounded(text: str, canonical: bool) -> Decimal | None:
    """The finite number a string writes, or None; past the bounds, refused when
    canonical (otherwise the string is left as sent, and refused by the canonical pass)."""
    try:
        return decimal_of(text)
    except NumberBoundError as exc:
        if canonical:
            raise _OutOfBounds(str(exc)) from None
        return None


def _to_decimal(value: int | float) -> Decimal | None:
    number = Decimal(value) if isinstance(value, int) else Decimal(str(value))
    return number if number.is_finite() else None


def _number(number: Decimal) -> int | float:
    # Within the bounds (numbers.decimal_of): int() of it costs at most 309 digits.
    if number == number.to_integral_value():
        return int(number)
    return float(number)


def _shown(value: Any) -> str:
    text = repr(value)
    return text[:40] + "…" if len(text) > 40 else text


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    return {
        bool: "a boolean",
        int: "a number",
        float: "a number",
        str: "a string",
        list: "an array",
    }.get(type(value), type(value).__name__)
