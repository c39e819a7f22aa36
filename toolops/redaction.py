"""Sensitive fields in args and results are shown as "[redacted]" to people (DESIGN.md
"Tracing"): by name (password, token, card number, …) or where the tool's JSON Schema
marks the property `"x-sensitive": true` or `"writeOnly": true`."""

from __future__ import annotations

import re
from typing import Any

REDACTED = "[redacted]"
SENSITIVE_NAME = re.compile(
    r"pass(word|wd|phrase)?|secret|token|api[-_]?key|authori[sz]ation|cookie|session|"
    r"card[-_]?(number|no)?$|^pan$|cvc|cvv|iban|ssn|social[-_]?security|private[-_]?key",
    re.IGNORECASE,
)


def redact(value: Any, schema: dict[str, Any] | None = None) -> Any:
    """A copy of `value` with sensitive fields replaced, at any depth."""
    if isinstance(value, dict):
        props = (schema or {}).get("properties") or {}
        out = {}
        for key, item in value.items():
            sub = props.get(key) if isinstance(props.get(key), dict) else None
            marked = bool(sub and (sub.get("x-sensitive") or sub.get("writeOnly")))
            if marked or SENSITIVE_NAME.search(str(key)):
                out[key] = REDACTED
            else:
                out[key] = redact(item, sub)
        return out
    if isinstance(value, list):
        items = (schema or {}).get("items")
        return [redact(item, items if isinstance(items, dict) else None) for item in value]
    return value
