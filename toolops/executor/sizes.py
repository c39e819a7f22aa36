"""Args no wider than their tool takes, judged before anything walks them (DESIGN.md:
tool lookup → args schema).

Every body is held to the deployment's JSON widths (toolops.jsonbound); a tool's schema
often says far less is enough: an object with `additionalProperties: false` takes at most
its listed properties, `maxProperties` and `maxItems` say it outright. JSON Schema would
refuse wider args too, but only after the canonical form has been made of them and after
walking every key (an `additionalProperties` error lists each extra one). Here only sizes
are compared — one `len()` per object or array the schema bounds, along the schema —
before any of that, and the call is invalid_args naming the field and the most it takes.

The schema is read as written: `properties`, `additionalProperties` (false, or a schema
for the others), `items`, `maxProperties`, `maxItems`. What it reaches only through
`$ref`, `allOf` or `patternProperties` is left to the JSON widths and the schema check."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class _Plan:
    """What one schema node bounds, and the nodes under it that bound anything."""

    keys: int | None = None
    items: int | None = None
    properties: dict[str, _Plan] = field(default_factory=dict)
    # The keys `properties` names: `others` is never theirs, bounded or not.
    declared: frozenset[str] = frozenset()
    others: _Plan | None = None  # additionalProperties given as a schema
    each: _Plan | None = None  # items given as a schema


# schema object → its plan, built once (as prepare.validator keeps validators): a catalog's
# schemas live as long as the catalog.
_plans: dict[int, tuple[dict[str, Any], _Plan | None]] = {}


def too_wide(args: dict[str, Any], schema: dict[str, Any]) -> str | None:
    """Why `args` are wider than `schema` takes, for the model; None when they are not."""
    plan = _plan_of(schema)
    if plan is None:
        return None
    stack: list[tuple[Any, _Plan, tuple[str, ...]]] = [(args, plan, ())]
    while stack:
        value, node, path = stack.pop()
        if type(value) is dict:
            if node.keys is not None and len(value) > node.keys:
                return _say(path, f"{len(value):,} properties", f"at most {node.keys:,}")
            for key, child in value.items():
                sub = node.properties.get(key) if key in node.declared else node.others
                if sub is not None and type(child) in (dict, list):
                    stack.append((child, sub, (*path, str(key))))
        elif type(value) is list:
            if node.items is not None and len(value) > node.items:
                return _say(path, f"{len(value):,} items", f"at most {node.items:,}")
            if node.each is not None:
                stack.extend(
                    (child, node.each, (*path, str(index)))
                    for index, child in enumerate(value)
                    if type(child) in (dict, list)
                )
    return None


def _say(path: tuple[str, ...], has: str, takes: str) -> str:
    if not path:
        return f"args have {has}; this tool takes {takes}"
    where = ".".join(path)
    return f"field {where!r} has {has}; this tool takes {takes} there"


def _plan_of(schema: dict[str, Any]) -> _Plan | None:
    hit = _plans.get(id(schema))
    if hit is not None and hit[0] is schema:  # the cache holds the schema: its id is its own
        return hit[1]
    if len(_plans) > 1024:  # catalogs reloaded many times over
        _plans.clear()
    plan = _build(schema)
    _plans[id(schema)] = (schema, plan)
    return plan


def _count(value: Any) -> int | None:
    return value if type(value) is int and value >= 0 else None


def _build(schema: Any) -> _Plan | None:
    """The plan of one schema node; None when nothing at or under it bounds a size."""
    if not isinstance(schema, dict):
        return None
    properties = schema.get("properties")
    properties = properties if isinstance(properties, dict) else {}
    keys = _count(schema.get("maxProperties"))
    extra = schema.get("additionalProperties")
    if extra is False and not schema.get("patternProperties"):
        keys = len(properties) if keys is None else min(keys, len(properties))
    children = {name: plan for name, sub in properties.items() if (plan := _build(sub))}
    # `additionalProperties` is for the keys no `patternProperties` matches either, and
    # `items` for the places after `prefixItems`: followed only where neither is written.
    others = _build(extra) if isinstance(extra, dict) else None
    if schema.get("patternProperties"):
        others = None
    each = None if schema.get("prefixItems") else _build(schema.get("items"))
    items = _count(schema.get("maxItems"))
    if keys is None and items is None and not children and others is None and each is None:
        return None
    return _Plan(
        keys=keys,
        items=items,
        properties=children,
        declared=frozenset(properties),
        others=others,
        each=each,
    )
