"""The policy document (API.md "Agent policy"): its TOML read into grants, rules and
limits, and every way it can be wrong named by table, entry and field. Cedar conditions
are checked against the catalog by cedar.py; this module checks everything else.

Names are checked too: an agent or a tool a policy names must exist (a typo must neither
grant nothing nor everything); `"*"` is the wildcard."""

from __future__ import annotations

import tomllib
import zoneinfo
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

WILDCARD = "*"
ACTIONS = ("approve", "approve_by_two", "refuse", "no_approval")
MODES = ("enforce", "log_only")
PERIODS = ("day", "week", "month", "total")
ON_EXCEED = ("refuse", "approve")
# Cedar's decimal: four digits after the point, and an i64 underneath.
MAX_DECIMAL = Decimal("922337203685477.5807")
TOP_KEYS = {"default", "grant", "rule", "limit"}
GRANT_KEYS = {"agents", "tools"}
RULE_KEYS = {"name", "agents", "tools", "when", "action", "mode"}
LIMIT_KEYS = {"name", "agents", "tools", "sum", "max", "per", "time_zone", "on_exceed"}


class PolicyError(ValueError):
    """A policy that cannot be applied, and where: `where` is "rule 'charges over 100'",
    "limit 2" or "grant 1"; `field` the key within it ("" for the document itself)."""

    def __init__(self, where: str, field: str, problem: str) -> None:
        self.where, self.field, self.problem = where, field, problem
        place = f"{where}, field {field!r}" if field else where
        super().__init__(f"{place}: {problem}")


@dataclass(frozen=True)
class Grant:
    agents: tuple[str, ...]
    tools: tuple[str, ...]


@dataclass(frozen=True)
class Rule:
    name: str
    agents: tuple[str, ...]
    tools: tuple[str, ...]
    when: str
    action: str
    mode: str = "enforce"

    @property
    def log_only(self) -> bool:
        return self.mode == "log_only"


@dataclass(frozen=True)
class Limit:
    name: str
    agents: tuple[str, ...]
    tools: tuple[str, ...]
    sum: str | None
    max: Decimal
    per: str
    time_zone: str
    on_exceed: str = "refuse"

    @property
    def counts(self) -> bool:
        """A count of calls, not a sum of an args field."""
        return self.sum is None


@dataclass(frozen=True)
class Document:
    default: str = "allow"
    grants: tuple[Grant, ...] = ()
    rules: tuple[Rule, ...] = ()
    limits: tuple[Limit, ...] = ()
    # Names as the document was checked against (for a readable "who may call what").
    notes: dict[str, Any] = field(default_factory=dict, compare=False)


def matches(names: Sequence[str], name: str) -> bool:
    return WILDCARD in names or name in names


def parse(text: str, *, agents: Iterable[str] | None, tools: Iterable[str] | None) -> Document:
    """The document in `text`, checked against the agents and (public) tools that exist
    (None: not checked — a version applied earlier, read back). Raises PolicyError
    naming the table, the entry and the field."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise PolicyError("the document", "", f"not valid TOML: {exc}") from None
    known_agents = None if agents is None else set(agents)
    known_tools = None if tools is None else set(tools)
    _unknown_keys(data, TOP_KEYS, "the document")
    default = data.get("default", "allow")
    if default not in ("allow", "deny"):
        raise PolicyError("the document", "default", f'must be "allow" or "deny", not {default!r}')
    grants = tuple(
        Grant(
            agents=_names(entry, "agents", f"grant {i}", known_agents, "agent"),
            tools=_names(entry, "tools", f"grant {i}", known_tools, "tool"),
        )
        for i, entry in _entries(data, "grant", GRANT_KEYS)
    )
    rules = tuple(
        _rule(i, entry, known_agents, known_tools) for i, entry in _entries(data, "rule", RULE_KEYS)
    )
    limits = tuple(
        _limit(i, entry, known_agents, known_tools)
        for i, entry in _entries(data, "limit", LIMIT_KEYS)
    )
    _unique([r.name for r in rules], "rule")
    _unique([limit.name for limit in limits], "limit")
    return Document(default=default, grants=grants, rules=rules, limits=limits)


def _entries(
    data: Mapping[str, Any], table: str, keys: set[str]
) -> list[tuple[int, dict[str, Any]]]:
    entries = data.get(table, [])
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise PolicyError("the document", table, f"write each {table} as a [[{table}]] table")
    for i, entry in enumerate(entries, 1):
        name = entry.get("name")
        _unknown_keys(entry, keys, f"{table} {name!r}" if isinstance(name, str) else f"{table} {i}")
    return list(enumerate(entries, 1))


def _unknown_keys(entry: Mapping[str, Any], keys: set[str], where: str) -> None:
    for key in entry:
        if key not in keys:
            raise PolicyError(
                where, key, f"unknown field; expected one of {', '.join(sorted(keys))}"
            )


def _names(
    entry: Mapping[str, Any], key: str, where: str, known: set[str] | None, what: str
) -> tuple[str, ...]:
    value = entry.get(key)
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise PolicyError(where, key, f'a non-empty list of {what} names, or ["*"]')
    for name in value:
        if known is not None and name != WILDCARD and name not in known:
            raise PolicyError(where, key, f"no {what} is named {name!r}")
    return tuple(value)


def _text(
    entry: Mapping[str, Any],
    key: str,
    where: str,
    choices: Sequence[str] = (),
    default: str | None = None,
) -> str:
    value = entry.get(key, default)
    if not isinstance(value, str) or not value.strip():
        raise PolicyError(where, key, "required, as a non-empty string")
    if choices and value not in choices:
        raise PolicyError(where, key, f"one of {', '.join(choices)}, not {value!r}")
    return value


def _rule(
    i: int, entry: Mapping[str, Any], agents: set[str] | None, tools: set[str] | None
) -> Rule:
    name = _text(entry, "name", f"rule {i}")
    where = f"rule {name!r}"
    return Rule(
        name=name.strip(),
        agents=_names(entry, "agents", where, agents, "agent"),
        tools=_names(entry, "tools", where, tools, "tool"),
        when=_text(entry, "when", where),
        action=_text(entry, "action", where, ACTIONS),
        mode=_text(entry, "mode", where, MODES, default="enforce"),
    )


def _limit(
    i: int, entry: Mapping[str, Any], agents: set[str] | None, tools: set[str] | None
) -> Limit:
    name = _text(entry, "name", f"limit {i}")
    where = f"limit {name!r}"
    sum_field = entry.get("sum")
    if sum_field is not None and (not isinstance(sum_field, str) or not sum_field.strip()):
        raise PolicyError(
            where, "sum", "the name of a decimal args field, or leave it out to count calls"
        )
    zone = _text(entry, "time_zone", where, default="UTC")
    try:
        zoneinfo.ZoneInfo(zone)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise PolicyError(where, "time_zone", f"no time zone is named {zone!r}") from None
    return Limit(
        name=name.strip(),
        agents=_names(entry, "agents", where, agents, "agent"),
        tools=_names(entry, "tools", where, tools, "tool"),
        sum=sum_field,
        max=_max(entry.get("max"), where, counts=sum_field is None),
        per=_text(entry, "per", where, PERIODS),
        time_zone=zone,
        on_exceed=_text(entry, "on_exceed", where, ON_EXCEED, default="refuse"),
    )


def _max(value: Any, where: str, *, counts: bool) -> Decimal:
    if counts:
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise PolicyError(
                where, "max", "a whole number of calls (0 or more) when sum is left out"
            )
        if value > 2**63 - 1:
            raise PolicyError(where, "max", "at most 9223372036854775807 calls")
        return Decimal(value)
    if not isinstance(value, str):
        raise PolicyError(where, "max", 'a decimal string such as "500.00" when sum is set')
    try:
        amount = Decimal(value.strip())
    except InvalidOperation:
        raise PolicyError(where, "max", f"{value!r} is not a decimal number") from None
    if not amount.is_finite() or amount < 0 or amount > MAX_DECIMAL:
        raise PolicyError(where, "max", f"between 0 and {MAX_DECIMAL}, not {value!r}")
    exponent = amount.as_tuple().exponent  # an int: the amount is finite
    if isinstance(exponent, int) and exponent < -4:
        raise PolicyError(where, "max", "at most four digits after the decimal point")
    return amount


def _unique(names: list[str], table: str) -> None:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise PolicyError(
                f"{table} {name!r}", "name", f"two {table}s are named {name!r}; names are unique"
            )
        seen.add(name)
