"""A query or compensation tool's args, mapped from the call it looks after: `$.args.x`
and `$.result.y` paths into the call's full args and result (API.md "Tool catalog
file"), or the tool's business key when the catalog maps nothing."""

from __future__ import annotations

from typing import Any

from toolops.models import ToolCall
from traces import services as traces

from .spec import Mapping, ToolSpec


def resolve_mapping(
    mapping: Mapping, spec: ToolSpec, call: ToolCall, missing: list[str] | None = None
) -> dict[str, Any]:
    """Args for a query or compensation tool, mapped from the original call. A path that
    finds nothing maps to None, and is named in `missing` when the caller passes a list.

    Mapped from the full args and result (the stored ones are redacted): a call read
    back from the database has them opened from the vault. Raises SealedArgsUnavailable
    when the vault cannot give them back: placeholders are never mapped."""
    args = traces.args_open(call) or {}
    if mapping.args is None:
        mapped = {k: args[k] for k in spec.business_key if k in args}
        if spec.client_reference:
            mapped[spec.client_reference] = call.client_reference
        return mapped
    out: dict[str, Any] = {}
    for name, path in mapping.args.items():
        if isinstance(path, str) and path.startswith("$."):
            source, _, dotted = path[2:].partition(".")
            value: Any = args if source == "args" else (traces.result_open(call) or {})
            for part in dotted.split("."):
                value = value.get(part) if isinstance(value, dict) else None
            if value is None and missing is not None:
                missing.append(path)
            out[name] = value
        else:
            out[name] = path
    return out
