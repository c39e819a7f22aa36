"""What a call asks for, before any database work: the tool, the args as sent (made to
fit the schema), their canonical form and digest, the schema's verdict, and — for a
write — the idempotency key. The API makes all of it before it reads the run, so that
one query can also find a replay."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from jsonschema import Draft202012Validator, FormatChecker

from toolops.tools import registry
from toolops.tools.spec import ToolSpec

from .canonical import ArgsError, canonical_json, digest, normalize, parse_args
from .keys import idempotency_key
from .numbers import decimal_of


@dataclass
class CallRequest:
    step_index: int
    tool: str
    args: Any
    tool_call_id: str | None = None
    depends_on: list[str] = field(default_factory=list)
    tokens: int = 0
    wait: float = 0.0
    # The agent's W3C `traceparent` header, if its request carried one.
    traceparent: str = ""


@dataclass
class Prepared:
    spec: ToolSpec | None
    args: dict[str, Any] | None
    digest: str
    canonical: bytes | None
    problem: str | None  # invalid args, for the model


_format_checker = FormatChecker()


@_format_checker.checks("decimal", raises=ValueError)
def _is_decimal(value: object) -> bool:
    if not isinstance(value, str):
        return True  # the "type" keyword judges non-strings
    # Bounded before Decimal sees it: a huge exponent is cheap to parse, costly to use.
    if decimal_of(value) is None:  # NumberBoundError (a ValueError) past the bounds
        raise ValueError(f"{value[:40]!r} is not a decimal number")
    return True


def write_key(
    *, agent_id: int, run_id: str, request: CallRequest, prepared: Prepared
) -> str | None:
    """The idempotency key of a write that will be claimed; None for anything else.

    `sha256(run : step_index : tool : canonical_args)`, the run named by its agent and
    run_id: two agents may both call a run `r-1`, and must never share keys."""
    spec = prepared.spec
    if spec is None or spec.is_read or prepared.problem is not None:
        return None
    assert prepared.canonical is not None
    return idempotency_key(
        run_id=f"{agent_id}/{run_id}", step_index=request.step_index, tool=spec.name,
        canonical_args=prepared.canonical,
    )  # fmt: skip


def prepare(request: CallRequest) -> Prepared:
    """The request's tool, args (as sent, made to fit the schema) and canonical form.
    Needs no database, so the API can make the key before it looks the run up."""
    spec = registry.get(request.tool, include_internal=False)
    try:
        raw = parse_args(request.args)
    except ArgsError as exc:
        text = request.args if isinstance(request.args, str) else repr(request.args)
        return Prepared(spec, None, digest(text.encode()), None, exc.message)
    schema = spec.params_schema if spec else None
    # The tool receives the args as sent (made to fit the schema); the key is made from
    # their canonical form, so model jitter does not change it.
    args = normalize(raw, schema, canonical=False)
    try:
        canonical = canonical_json(normalize(raw, schema))
    except ArgsError as exc:
        return Prepared(spec, args, digest(repr(args).encode()), None, exc.message)
    problem = schema_problem(spec, args) if spec else None
    return Prepared(spec, args, digest(canonical), canonical, problem)


# schema object → its validator, built once: a validator is read-only once built, and a
# catalog's schemas live as long as the catalog (a policy override shares its tool's).
_validators: dict[int, tuple[dict[str, Any], Draft202012Validator]] = {}


def validator(schema: dict[str, Any], *, formats: bool = True) -> Draft202012Validator:
    """The validator of a catalog schema (with ToolOps' format checks when `formats`)."""
    key = id(schema) * 2 + formats
    hit = _validators.get(key)
    if hit is not None and hit[0] is schema:  # the cache holds the schema: its id is its own
        return hit[1]
    if len(_validators) > 1024:  # catalogs reloaded many times over
        _validators.clear()
    built = Draft202012Validator(schema, format_checker=_format_checker if formats else None)
    _validators[key] = (schema, built)
    return built


def schema_problem(spec: ToolSpec, args: dict[str, Any]) -> str | None:
    errors = sorted(validator(spec.params_schema).iter_errors(args),
                    key=lambda e: list(e.absolute_path))  # fmt: skip
    if not errors:
        return None
    first = errors[0]
    where = ".".join(str(p) for p in first.absolute_path)
    message = first.message
    if first.validator == "required":
        return message  # "'qty' is a required property" names the field already
    if first.validator == "additionalProperties":
        return message
    return f"field {where!r}: {message}" if where else message
