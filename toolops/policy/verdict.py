"""What the policy in force says about one call, before anything is claimed or sent
(API.md "Agent policy"): not granted, refused by a rule, held for one reviewer or two,
its catalog approval lifted, and which limits it reserves against.

When several rules match: `refuse` wins, then `approve_by_two`, then `approve`;
`no_approval` lifts the catalog's approval only when no other rule asks for one. A
`log_only` rule changes nothing and is recorded as `would_<action>`. A call whose args
the engine cannot hold (a decimal with more digits than Cedar keeps) fails closed: every
rule that would refuse or hold it counts as matched, no rule lifts anything."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.utils import timezone

from . import limits as spend
from .active import Active
from .document import Limit, Rule
from .limits import Hold

# Strongest first: the action a set of matching enforce rules comes to.
RANK = {"refuse": 3, "approve_by_two": 2, "approve": 1}
NOT_GRANTED = "not granted"


@dataclass
class Verdict:
    version: int
    # [rule, action] for each rule that decided (log_only ones as "would_<action>").
    rules: list[list[str]] = field(default_factory=list)
    # The rule that refuses the call (NOT_GRANTED: no grant gives the agent the tool).
    refused_by: str | None = None
    # The rule that holds it for a person, and how many must approve.
    held_by: str | None = None
    approvals_required: int = 0
    # A `no_approval` rule lifts the catalog's approval.
    lifted: bool = False
    # The limits that count this call, each with its reservation.
    charges: list[tuple[Limit, Hold]] = field(default_factory=list)

    @property
    def record(self) -> dict[str, Any]:
        """The call object's `policy` (API.md): version and the names that decided."""
        return {"version": self.version, "rules": names(self.rules)}


def names(decided: list[list[str]] | None) -> list[str]:
    """Decided rules as API.md names them: `log_only` ones as "would_<action>: <rule>"."""
    return [
        f"{action}: {rule}" if action.startswith("would_") else rule
        for rule, action in decided or ()
    ]


def verdict(
    policy: Active,
    *,
    agent: str,
    agent_created: datetime | None,
    spec: Any,
    args: Mapping[str, Any],
    now: datetime | None = None,
) -> Verdict:
    """The policy's word on a call of `spec` with canonical `args` by `agent`."""
    decided = Verdict(version=policy.version)
    if not policy.may_call(agent, spec.name):
        decided.refused_by = NOT_GRANTED
        decided.rules.append([NOT_GRANTED, "refuse"])
        return decided
    rule_indexes, covering = policy.scope(agent, spec.name)
    if rule_indexes and policy.compiled is not None:
        _rules(policy, decided, rule_indexes, agent, agent_created, spec, args)
    if decided.refused_by is None:
        when = now or spend.clock()
        for limit in covering:
            period = spend.period(limit, when)
            hold = Hold(
                limit=limit.name,
                period=period.key,
                currency=spend.currency_of(spec.params_schema, args, limit),
                units=spend.units(limit, spend.amount_of(limit, args)),
                cap=spend.cap_units(limit),
            )
            decided.charges.append((limit, hold))
    return decided


def _rules(
    policy: Active,
    decided: Verdict,
    indexes: tuple[int, ...],
    agent: str,
    agent_created: datetime | None,
    spec: Any,
    args: Mapping[str, Any],
) -> None:
    rules = policy.document.rules
    assert policy.compiled is not None
    age = (timezone.now() - agent_created).days if agent_created is not None else 0
    holding, erred = policy.compiled.holding(
        agent=agent,
        age_days=age,
        tool=spec.name,
        kind=spec.kind,
        args=args,
        types=spec.params_schema,
    )
    matched: list[Rule] = []
    for i in indexes:
        rule = rules[i]
        # A condition the engine could not evaluate fails closed.
        fails_closed = i in erred and rule.action != "no_approval"
        if i in holding or fails_closed:
            matched.append(rule)
    strongest = None
    for rule in matched:
        if rule.log_only:
            decided.rules.append([rule.name, f"would_{rule.action}"])
            continue
        decided.rules.append([rule.name, rule.action])
        if rule.action in RANK and (
            strongest is None or RANK[rule.action] > RANK[strongest.action]
        ):
            strongest = rule
    if strongest is None:
        decided.lifted = any(r.action == "no_approval" and not r.log_only for r in matched)
    elif strongest.action == "refuse":
        decided.refused_by = strongest.name
    else:
        decided.held_by = strongest.name
        decided.approvals_required = 2 if strongest.action == "approve_by_two" else 1
