"""What a person reads of a call: its title from the catalog's `summary` ("Charge {amount}
{currency} to {customer} for order {order_id}"), then the `display` fields, each value
redacted by the tool's rules. The approval, the ticket, the timeline and the notification
all title a call so. Plain text: templates escape it, e-mails and webhooks carry it as is."""

from __future__ import annotations

import json
import string
from typing import Any

from traces.sensitive import redact

from .spec import ToolSpec

MISSING = "—"
MAX_VALUE = 80  # characters of one value in a title or a fact


def summary_places(template: str) -> list[str]:
    """The field paths a summary names. ValueError for a template that is not one: an
    unclosed brace, a conversion (!r) or a format spec (:>5)."""
    places = []
    for _text, place, spec, conversion in string.Formatter().parse(template):
        if place is None:
            continue
        if spec or conversion:
            raise ValueError(f"{{{place}}} may not carry a conversion or a format spec")
        if not place:
            raise ValueError("{} must name a field, e.g. {amount}")
        places.append(place)
    return places


def field_value(args: Any, result: Any, path: str) -> Any:
    """A field by its dotted path, in the args first, then in the result; None if absent."""
    for source in (args, result):
        value = source
        for part in path.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        if value is not None:
            return value
    return None


def shown(value: Any) -> str:
    """One value as a person reads it: text as is, anything else as compact JSON."""
    if value is None:
        return MISSING
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= MAX_VALUE else text[: MAX_VALUE - 1] + "…"


def label(path: str) -> str:
    """ "order_id" → "Order id", "payer.email" → "Payer email"."""
    words = path.replace(".", " ").replace("_", " ").replace("-", " ").split()
    return " ".join(words).capitalize()


def _redacted(spec: ToolSpec, args: Any, result: Any) -> tuple[Any, Any]:
    return redact(args, spec=spec), redact(result, spec=spec, result=True)


def title(spec: ToolSpec | None, args: Any, result: Any = None, *, tool: str = "") -> str:
    """The call's one-line title: its summary with the fields filled in, else the tool's
    name and the first display field."""
    if spec is None:
        return tool
    args, result = _redacted(spec, args, result)
    if spec.summary:
        values = {p: shown(field_value(args, result, p)) for p in summary_places(spec.summary)}
        out, template = [], spec.summary
        for text, place, _spec, _conv in string.Formatter().parse(template):
            out.append(text)
            if place is not None:
                out.append(values[place])
        return "".join(out)
    for path in spec.display:
        value = field_value(args, result, path)
        if value is not None:
            return f"{spec.name} · {label(path)} {shown(value)}"
    return spec.name


def facts(spec: ToolSpec | None, args: Any, result: Any = None) -> list[tuple[str, str]]:
    """The `display` fields as (label, value) pairs, in catalog order; absent ones left out."""
    if spec is None or not spec.display:
        return []
    args, result = _redacted(spec, args, result)
    pairs = []
    for path in spec.display:
        value = field_value(args, result, path)
        if value is not None:
            pairs.append((label(path), shown(value)))
    return pairs
