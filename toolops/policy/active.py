"""The policy in force, as each process holds it.

Every call reads the active version's number with its run, in the same query
(executor/context.py, `VERSION_SQL`): no round trip of its own, and an apply is in force
for the next call on every process. Only when that number differs from the one this
process compiled does it read the version's text and compile it (one query, once per
apply per process). Pages and the worker, which do not read a run, ask `current()`."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from . import cedar
from .document import WILDCARD, Document, Grant, Limit, Rule, matches, parse
from .models import PolicyVersion

_TABLE = PolicyVersion._meta.db_table
# The active version's number, as a column of a query that reads something else.
VERSION_SQL = f"(SELECT number FROM {_TABLE} WHERE state = 'applied' ORDER BY number DESC LIMIT 1)"


@dataclass
class Active:
    """One applied version, parsed and compiled."""

    version: int
    document: Document
    compiled: cedar.Compiled | None
    # (agent, tool) → (rules that apply, limits that apply), computed on first use.
    _scope: dict[tuple[str, str], tuple[tuple[int, ...], tuple[Limit, ...]]] = field(
        default_factory=dict
    )

    def may_call(self, agent: str, tool: str) -> bool:
        """Whether a grant gives the agent the tool (always, with `default = "allow"`)."""
        if self.document.default == "allow":
            return True
        return any(_covers(g, agent, tool) for g in self.document.grants)

    def scope(self, agent: str, tool: str) -> tuple[tuple[int, ...], tuple[Limit, ...]]:
        """The indexes of the rules, and the limits, that name this agent and tool."""
        key = (agent, tool)
        found = self._scope.get(key)
        if found is None:
            rules = tuple(
                i for i, rule in enumerate(self.document.rules) if _covers(rule, agent, tool)
            )
            limits = tuple(limit for limit in self.document.limits if _covers(limit, agent, tool))
            found = self._scope[key] = (rules, limits)
        return found


def _covers(entry: Grant | Rule | Limit, agent: str, tool: str) -> bool:
    return matches(entry.agents, agent) and matches(entry.tools, tool)


_held: Active | None = None
_lock = threading.Lock()


def active(number: int | None) -> Active | None:
    """Version `number` compiled (None: no policy is in force)."""
    global _held
    if number is None:
        return None
    held = _held
    if held is not None and held.version == number:
        return held
    with _lock:
        if _held is not None and _held.version == number:
            return _held
        text = PolicyVersion.objects.values_list("text", flat=True).get(number=number)
        document = parse(text, agents=None, tools=None)
        _held = Active(version=number, document=document, compiled=cedar.Compiled.of(document))
        return _held


def forget() -> None:
    """Drop this process's compiled version (an apply in this process; a database whose
    version numbers started over, as between tests)."""
    global _held
    _held = None


def current_number() -> int | None:
    row = (
        PolicyVersion.objects.filter(state=PolicyVersion.State.APPLIED)
        .order_by("-number")
        .values_list("number", flat=True)
        .first()
    )
    return row


def current() -> Active | None:
    """The policy in force now, read from the database (for pages and the worker)."""
    return active(current_number())


def tools_for(policy: Active | None, agent: str, names: list[str]) -> list[str]:
    """Of `names`, those the agent may call."""
    if policy is None:
        return names
    return [name for name in names if policy.may_call(agent, name)]


__all__ = ["VERSION_SQL", "WILDCARD", "Active", "active", "current", "current_number", "tools_for"]
