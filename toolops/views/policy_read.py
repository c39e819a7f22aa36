"""The agent policy as people read it on /console/policy/: the active version's grants as a
table (agent × public tool), its rules as sentences, its limits with what each agent has
spent this period; every version for the history; and the differences between two texts,
line by line.

Agents in the grants table are those a grant names, plus "every other agent" (what `"*"`
gives): an agent a grant does not name gets exactly that row, so listing it again would
only repeat it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from toolops.models import Agent
from toolops.policy import active as in_force
from toolops.policy import versions, wording
from toolops.policy.document import WILDCARD, Document, Grant, Limit, Rule, matches
from toolops.policy.models import PolicyVersion
from toolops.views.common import catalog
from toolops.views.policy_spend import IN_PERIOD, Spent, nothing_spent, resets_words, spent_now

OTHERS = "every other agent"


@dataclass(frozen=True)
class GrantRow:
    agent: str
    others: bool  # the "*" row
    cells: list[bool]  # one per public tool, in the table's order


@dataclass(frozen=True)
class RuleShown:
    rule: Rule
    sentence: str


@dataclass(frozen=True)
class LimitShown:
    limit: Limit
    sentence: str
    in_period: str  # "today", "this week", "in total"
    resets: str  # "it resets at 00:00 UTC"
    spending: list[Spent]
    # `"*"`: the agents not listed have spent nothing this period.
    everyone: bool


@dataclass(frozen=True)
class Shown:
    """The active version, readable."""

    version: PolicyVersion
    document: Document
    tools: list[str]
    grants: list[GrantRow]
    rules: list[RuleShown]
    limits: list[LimitShown]


def public_tool_names() -> list[str]:
    """The public tools, sorted (none when the catalog cannot be loaded)."""
    return sorted(name for name, spec in catalog().items() if not spec.internal)


def active_shown() -> Shown | None:
    """The version in force, readable; None when no policy is in force."""
    version = (
        PolicyVersion.objects.filter(state=PolicyVersion.State.APPLIED)
        .select_related("created_by", "confirmed_by")
        .order_by("-number")
        .first()
    )
    if version is None:
        return None
    policy = in_force.active(version.number)
    assert policy is not None
    document = policy.document
    tools = public_tool_names()
    return Shown(
        version=version,
        document=document,
        tools=tools,
        grants=grant_rows(document, tools),
        rules=[RuleShown(rule, wording.rule_sentence(rule)) for rule in document.rules],
        limits=limits_shown(document.limits),
    )


def grant_rows(document: Document, tools: list[str]) -> list[GrantRow]:
    """Who may call what under `default = "deny"` (under "allow" everyone may call
    everything, and the page says so instead)."""
    named = sorted({a for g in document.grants for a in g.agents if a != WILDCARD})
    rows = [GrantRow(a, False, [_granted(document.grants, a, t) for t in tools]) for a in named]
    everyone = [g for g in document.grants if WILDCARD in g.agents]
    rows.append(GrantRow(OTHERS, True, [_granted(tuple(everyone), WILDCARD, t) for t in tools]))
    return rows


def _granted(grants: tuple[Grant, ...], agent: str, tool: str) -> bool:
    return any(matches(g.agents, agent) and matches(g.tools, tool) for g in grants)


def limits_shown(limits: tuple[Limit, ...]) -> list[LimitShown]:
    """Each limit with every agent's spending this period (one query for them all): the
    agents it names, even at nothing spent; for `"*"`, those that spent anything."""
    spent = spent_now(limits)
    shown = []
    for limit in limits:
        mine = [s for s in spent if s.limit.name == limit.name]
        everyone = WILDCARD in limit.agents
        if not everyone:
            having = {s.agent for s in mine}
            mine += [nothing_spent(limit, 0, a) for a in limit.agents if a not in having]
        mine.sort(key=lambda s: (s.agent, s.currency))
        shown.append(
            LimitShown(
                limit=limit,
                sentence=wording.limit_sentence(limit),
                in_period=IN_PERIOD[limit.per],
                resets=resets_words(limit),
                spending=mine,
                everyone=everyone,
            )
        )
    return shown


@dataclass(frozen=True)
class AgentPolicy:
    """What the policy in force gives one agent (the agents page)."""

    version: int
    tools: list[str]  # the public tools it may call
    all_tools: bool  # every public tool
    limits: list[Spent]  # each limit that counts its calls, per currency spent


def agent_policies(agents: Sequence[Agent]) -> dict[int, AgentPolicy]:
    """By agent pk; empty when no policy is in force. One query for every spending."""
    policy = in_force.current()
    if policy is None:
        return {}
    names = public_tool_names()
    spending: dict[tuple[int, str], list[Spent]] = {}
    for spent in spent_now(policy.document.limits):
        spending.setdefault((spent.agent_id, spent.limit.name), []).append(spent)
    found = {}
    for agent in agents:
        tools = in_force.tools_for(policy, agent.name, names)
        limits = [
            s
            for limit in policy.document.limits
            if matches(limit.agents, agent.name)
            for s in spending.get((agent.pk, limit.name))
            or [nothing_spent(limit, agent.pk, agent.name)]
        ]
        found[agent.pk] = AgentPolicy(policy.version, tools, tools == names, limits)
    return found


@dataclass(frozen=True)
class VersionRow:
    version: PolicyVersion
    active: bool
    when: datetime

    @property
    def state(self) -> str:
        return "in force" if self.active else self.version.state

    @property
    def may_roll_back(self) -> bool:
        """An earlier version that was in force may be put back."""
        return not self.active and self.version.state == PolicyVersion.State.APPLIED


def history() -> list[VersionRow]:
    """Every version, newest first (one query)."""
    rows = PolicyVersion.objects.select_related("created_by", "confirmed_by").order_by("-number")
    found, seen_active = [], False
    for version in rows:
        is_active = not seen_active and version.state == PolicyVersion.State.APPLIED
        seen_active = seen_active or is_active
        found.append(VersionRow(version, is_active, version.applied_at or version.created_at))
    return found


@dataclass(frozen=True)
class DiffLine:
    text: str
    kind: str  # "add", "del", "hunk", "file" or "same"


def diff_lines(old: str, new: str, *, old_name: str, new_name: str) -> list[DiffLine]:
    """versions.diff, a line each, marked for colour; [] when the texts are the same."""
    # A last line without its newline would run into the next line of the diff.
    text = versions.diff(_ended(old), _ended(new), old_name=old_name, new_name=new_name)
    return [DiffLine(line, _kind(line)) for line in text.splitlines()]


def _ended(text: str) -> str:
    return text if not text or text.endswith("\n") else f"{text}\n"


def _kind(line: str) -> str:
    if line.startswith(("+++", "---")):
        return "file"
    if line.startswith("@@"):
        return "hunk"
    return {"+": "add", "-": "del"}.get(line[:1], "same")
