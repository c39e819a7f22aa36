"""Rules' conditions in Cedar, evaluated by the Cedar engine (cedarpy), never by Python.

The Cedar schema is made from the catalog: one action per public tool, whose context is
`{args: …}` typed from the tool's params JSON Schema — a `"format": "decimal"` string is
a `decimal`, an integer a `Long`, a string a `String`, a boolean a `Bool`, an object a
record and an array a set; a field the schema does not require is optional (a condition
must test it with `has`). The principal is `Agent` (`name`, `age_days`), the resource
`Tool` (`name`, `kind`). Every rule becomes one `permit` whose action scope is its
tools, so the validator checks each condition against exactly the tools it names, and
one evaluation answers which rules' conditions hold for a call."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

import cedarpy

from .document import WILDCARD, Document, PolicyError

ACTION_TYPE = "Action"


def schema_json(tools: Sequence[Any]) -> dict[str, Any]:
    """The Cedar schema (JSON form) for the public tools `tools` (ToolSpecs)."""
    actions = {
        spec.name: {
            "appliesTo": {
                "principalTypes": ["Agent"],
                "resourceTypes": ["Tool"],
                "context": {
                    "type": "Record",
                    "attributes": {"args": _record(spec.params_schema)},
                },
            }
        }
        for spec in tools
    }
    string = {"type": "String"}
    return {
        "": {
            "entityTypes": {
                "Agent": {
                    "shape": {
                        "type": "Record",
                        "attributes": {"name": string, "age_days": {"type": "Long"}},
                    }
                },
                "Tool": {
                    "shape": {"type": "Record", "attributes": {"name": string, "kind": string}}
                },
            },
            "actions": actions,
        }
    }


def _record(schema: Mapping[str, Any]) -> dict[str, Any]:
    required = set(schema.get("required") or ())
    attributes = {}
    for name, sub in (schema.get("properties") or {}).items():
        typed = _type(sub if isinstance(sub, Mapping) else {})
        if typed is not None:
            attributes[name] = {**typed, "required": name in required}
    return {"type": "Record", "attributes": attributes}


def _type(schema: Mapping[str, Any]) -> dict[str, Any] | None:
    """A JSON Schema type as Cedar's; None for what Cedar cannot type (a condition that
    names such a field is refused by the validator, naming it)."""
    kind = schema.get("type")
    if kind == "string":
        if schema.get("format") == "decimal":
            return {"type": "Extension", "name": "decimal"}
        return {"type": "String"}
    if kind == "integer":
        return {"type": "Long"}
    if kind == "boolean":
        return {"type": "Boolean"}
    if kind == "object":
        return _record(schema)
    if kind == "array" and isinstance(schema.get("items"), Mapping):
        element = _type(schema["items"])
        return None if element is None else {"type": "Set", "element": element}
    return None


def rule_text(index: int, name: str, tools: Sequence[str], when: str) -> str:
    """One rule as a Cedar policy: its tools are its action scope."""
    scope = (
        "action"
        if WILDCARD in tools
        else "action in [" + ", ".join(f"{ACTION_TYPE}::{json.dumps(t)}" for t in tools) + "]"
    )
    head = f"@id({json.dumps(str(index))})\npermit(principal, {scope}, resource)"
    return f"{head} when {{\n{when}\n}};\n"


def check(document: Document, tools: Sequence[Any]) -> None:
    """Refuse a document whose conditions do not validate against the catalog (naming
    the rule), or whose limit sums a field a tool does not have as a number."""
    schema = json.dumps(schema_json(tools))
    by_name = {spec.name: spec for spec in tools}
    for index, rule in enumerate(document.rules):
        text = rule_text(index, rule.name, rule.tools, rule.when)
        result = cedarpy.validate_policies(text, schema)
        if not result.validation_passed:
            problems = "; ".join(_plain(e.error) for e in result.errors) or "does not validate"
            raise PolicyError(f"rule {rule.name!r}", "when", problems)
    for limit in document.limits:
        if limit.sum is None:
            continue
        names = by_name if WILDCARD in limit.tools else {n: by_name[n] for n in limit.tools}
        for spec in names.values():
            field_schema = (spec.params_schema.get("properties") or {}).get(limit.sum)
            if not isinstance(field_schema, Mapping) or not _summable(field_schema):
                raise PolicyError(
                    f"limit {limit.name!r}",
                    "sum",
                    f"tool {spec.name!r} has no decimal or number args field {limit.sum!r}",
                )


def _summable(schema: Mapping[str, Any]) -> bool:
    kind = schema.get("type")
    return kind in ("number", "integer") or (kind == "string" and schema.get("format") == "decimal")


def _plain(error: str) -> str:
    # Cedar names the policy by its parser id; the rule's name is said already. A parse
    # error is about the condition alone (its end is where the `when { }` closes).
    if error.startswith("Policy parse error: "):
        problem = error.removeprefix("Policy parse error: ")
        if "`}`" in problem:
            problem += ": the condition ends before it is complete"
        return f"the condition does not parse as Cedar ({problem})"
    return error.split("`, ", 1)[-1] if error.startswith("for policy `") else error


# Parsed entity pairs (agent, tool) a process keeps; past it, it starts again.
ENTITIES_KEPT = 1024


@dataclass(frozen=True)
class Compiled:
    """A document's rules as one parsed Cedar policy set, ready to evaluate; and the
    principal and resource entities of the calls it has judged, parsed once each."""

    policies: Any
    count: int
    _entities: dict[tuple[str, int, str, str], Any] = field(default_factory=dict, compare=False)

    @classmethod
    def of(cls, document: Document) -> Compiled | None:
        if not document.rules:
            return None
        text = "".join(rule_text(i, r.name, r.tools, r.when) for i, r in enumerate(document.rules))
        return cls(policies=cedarpy.PolicySet.from_str(text), count=len(document.rules))

    def holding(
        self,
        *,
        agent: str,
        age_days: int,
        tool: str,
        kind: str,
        args: Mapping[str, Any],
        types: Mapping[str, Any],
    ) -> tuple[set[int], set[int]]:
        """The indexes of the rules whose conditions hold for this call, and of those the
        engine could not evaluate (an overflow; or args Cedar cannot hold at all, such as
        a decimal with more than four digits after the point: then every rule)."""
        request = {
            "principal": {"type": "Agent", "id": agent},
            "action": {"type": ACTION_TYPE, "id": tool},
            "resource": {"type": "Tool", "id": tool},
            "context": {"args": _values(args, types)},
        }
        result = cedarpy.is_authorized(
            request, self.policies, self._entities_of(agent, age_days, tool, kind)
        )
        holding = {_index(reason) for reason in result.diagnostics.reasons}
        erred: set[int] = set()
        for error in result.diagnostics.errors:
            if "failed to build request" in error:
                return holding, set(range(self.count))
            found = _POLICY_ID.search(error)
            if found is not None:
                erred.add(int(found.group(1)))
        return holding, erred

    def _entities_of(self, agent: str, age_days: int, tool: str, kind: str) -> Any:
        key = (agent, age_days, tool, kind)
        parsed = self._entities.get(key)
        if parsed is None:
            if len(self._entities) >= ENTITIES_KEPT:
                self._entities.clear()
            entities = [
                {
                    "uid": {"type": "Agent", "id": agent},
                    "attrs": {"name": agent, "age_days": age_days},
                    "parents": [],
                },
                {
                    "uid": {"type": "Tool", "id": tool},
                    "attrs": {"name": tool, "kind": kind},
                    "parents": [],
                },
            ]
            parsed = self._entities[key] = cedarpy.Entities.from_json_str(json.dumps(entities))
        return parsed


# Cedar names each policy of a set by its place: "policy3" is the fourth rule.
_POLICY_ID = re.compile(r"policy `policy(\d+)`")


def _index(policy_id: str) -> int:
    return int(policy_id.removeprefix("policy"))


def cedar_decimal(value: Any) -> str | None:
    """A decimal as Cedar writes one: a point and at least one digit after it ("100" is
    "100.0"); trailing zeros past four digits dropped. More digits than Cedar keeps stay,
    and the engine refuses the request (the call's rules then fail closed)."""
    try:
        amount = Decimal(str(value).strip())
    except InvalidOperation:
        return None
    if not amount.is_finite():
        return None
    exponent = amount.as_tuple().exponent  # an int: the amount is finite
    if isinstance(exponent, int) and exponent < -4:
        amount = amount.normalize()
    text = format(amount, "f")
    return text if "." in text else f"{text}.0"


def _values(args: Mapping[str, Any], schema: Mapping[str, Any]) -> dict[str, Any]:
    """The call's canonical args as Cedar JSON values, typed by the tool's schema."""
    properties = schema.get("properties") or {}
    out: dict[str, Any] = {}
    for name, value in args.items():
        sub = properties.get(name)
        if not isinstance(sub, Mapping):
            continue
        typed = _value(value, sub)
        if typed is not None:
            out[name] = typed
    return out


def _value(value: Any, schema: Mapping[str, Any]) -> Any:
    kind = schema.get("type")
    if kind == "string" and schema.get("format") == "decimal":
        text = cedar_decimal(value)
        return None if text is None else {"__extn": {"fn": "decimal", "arg": text}}
    if kind == "integer" and isinstance(value, int) and not isinstance(value, bool):
        return value
    if kind == "string" and isinstance(value, str):
        return value
    if kind == "boolean" and isinstance(value, bool):
        return value
    if kind == "object" and isinstance(value, Mapping):
        return _values(value, schema)
    if kind == "array" and isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        items = [_value(v, schema["items"]) for v in value]
        return [v for v in items if v is not None]
    return None
