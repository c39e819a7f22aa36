"""Replies, JSON bodies and field checks shared by the shop's business and control endpoints.

Every answer is JSON, and a bad field is a 400 that names the field, so a test or the
demo can tell exactly which argument the shop refused.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

JSON = dict[str, Any]


@dataclass
class Reply:
    status: int
    body: JSON
    headers: dict[str, str] = field(default_factory=dict)


class Invalid(Exception):
    """A missing or ill-typed field; answered 400 with the field named."""

    def __init__(self, field_name: str, problem: str) -> None:
        super().__init__(f"{field_name}: {problem}")
        self.field_name = field_name


def invalid_reply(exc: Invalid) -> Reply:
    return Reply(400, {"error": "invalid", "field": exc.field_name, "detail": str(exc)})


def not_found(detail: str) -> Reply:
    return Reply(404, {"error": "not_found", "detail": detail})


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def parse_json(raw: bytes) -> Any:
    # Decimal keeps "199.00" sent as a number exact; NaN/Infinity are not JSON.
    return json.loads(raw.decode("utf-8"), parse_float=Decimal, parse_constant=_reject_constant)


def _json_default(value: object) -> object:
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def dumps(value: object) -> bytes:
    return json.dumps(value, default=_json_default).encode()


def body_object(raw: bytes) -> JSON:
    """Parse a request body that must be a JSON object; an empty body is {}."""
    if not raw.strip():
        return {}
    try:
        body = parse_json(raw)
    except (UnicodeDecodeError, ValueError) as exc:
        raise Invalid("body", f"malformed JSON ({exc})") from None
    if not isinstance(body, dict):
        raise Invalid("body", "must be a JSON object")
    return body


def text_field(body: JSON, name: str) -> str:
    value = optional_text_field(body, name)
    if value is None:
        raise Invalid(name, "is required")
    return value


def optional_text_field(body: JSON, name: str) -> str | None:
    value = body.get(name)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise Invalid(name, "must be a non-empty string")
    return value.strip()


def quantity_field(body: JSON, name: str) -> int:
    value = body.get(name)
    if value is None:
        raise Invalid(name, "is required")
    # JSON Schema counts 2.0 as an integer, so a caller validating with it may pass one on.
    if isinstance(value, Decimal) and value == value.to_integral_value():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise Invalid(name, "must be an integer")
    if value < 1:
        raise Invalid(name, "must be at least 1")
    return value


def amount_field(body: JSON, name: str) -> str:
    """A decimal string or number, stored as a plain decimal string ("199.00" stays so)."""
    value = body.get(name)
    if value is None:
        raise Invalid(name, "is required")
    if isinstance(value, bool) or not isinstance(value, str | int | Decimal):
        raise Invalid(name, "must be a decimal string or a number")
    try:
        amount = Decimal(value.strip() if isinstance(value, str) else value)
    except InvalidOperation:
        raise Invalid(name, "must be a decimal string or a number") from None
    text = format(amount, "f") if amount.is_finite() else ""
    if not text or amount < 0 or len(text) > 40:
        raise Invalid(name, "must be a finite, non-negative decimal")
    return text


def new_id(prefix: str) -> str:
    # Random, not sequential: ids must not repeat after /_shop/reset, since ToolOps keeps them.
    return f"{prefix}_{uuid.uuid4().hex[:16]}"
