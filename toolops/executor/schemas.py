"""A tool's JSON Schemas applied to a call's args and to its result (DESIGN.md: args
schema; a result that breaks its schema is `degraded`).

Two engines, one verdict. `jsonschema-rs` (Rust) answers whether an instance is valid:
~1 µs on the demo `charge` schema, where python-jsonschema takes ~25 µs, and a call's
args and result are checked on every call. Only an instance it refuses is judged again
by python-jsonschema, whose errors are the words the model reads (API.md: "field 'qty':
-1 is less than the minimum of 1"), so their wording never changes with the engine. An
instance valid for the Rust engine is valid: where the two differ (a `pattern` in
Python's regex dialect, a format one engine checks more strictly), the Python engine's
verdict is the one that holds for a refusal, and the stricter engine's for a pass."""

from __future__ import annotations

from typing import Any

import jsonschema_rs
from jsonschema import Draft202012Validator, FormatChecker, ValidationError

from .numbers import decimal_of

_format_checker = FormatChecker()


@_format_checker.checks("decimal", raises=ValueError)
def _is_decimal(value: object) -> bool:
    if not isinstance(value, str):
        return True  # the "type" keyword judges non-strings
    # Bounded before Decimal sees it: a huge exponent is cheap to parse, costly to use.
    if decimal_of(value) is None:  # NumberBoundError (a ValueError) past the bounds
        raise ValueError(f"{value[:40]!r} is not a decimal number")
    return True


def _is_decimal_rs(value: str) -> bool:
    try:
        return _is_decimal(value)
    except ValueError:
        return False


class _Validators:
    """A schema's two validators, built once: a validator is read-only once built."""

    def __init__(self, schema: dict[str, Any], formats: bool) -> None:
        self.fast = jsonschema_rs.validator_for(
            schema,
            validate_formats=formats,
            formats={"decimal": _is_decimal_rs} if formats else None,
        )
        self.worded = Draft202012Validator(
            schema, format_checker=_format_checker if formats else None
        )


# (schema id, formats) → (the schema, its validators): a catalog's schemas live as long
# as the catalog (a policy override shares its tool's); the cache holds each schema, so
# that its id stays its own.
_cache: dict[tuple[int, bool], tuple[dict[str, Any], _Validators]] = {}


def _validators(schema: dict[str, Any], formats: bool) -> _Validators:
    key = (id(schema), formats)
    hit = _cache.get(key)
    if hit is not None and hit[0] is schema:
        return hit[1]
    if len(_cache) > 1024:  # catalogs reloaded many times over
        _cache.clear()
    built = _Validators(schema, formats)
    _cache[key] = (schema, built)
    return built


def schema_errors(
    schema: dict[str, Any], instance: Any, *, formats: bool = True
) -> list[ValidationError]:
    """What `schema` says is wrong with `instance`, in python-jsonschema's order; none
    when it is valid. `formats`: ToolOps' format checks (a result's are not checked)."""
    validators = _validators(schema, formats)
    try:
        if validators.fast.is_valid(instance):
            return []
    except ValueError:
        pass  # a value the Rust engine cannot take (none from JSON): the Python one judges
    return list(validators.worded.iter_errors(instance))


def where(error: ValidationError) -> str:
    """The dotted path of the value an error is about ('' for the instance itself)."""
    return ".".join(str(p) for p in error.absolute_path)
