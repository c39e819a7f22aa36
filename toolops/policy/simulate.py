"""What a draft policy would have done to the calls of the last days (API.md "Agent
policy", `policy simulate`; the console's Simulate): each call is put to the draft's
verdict as it was admitted, and each limit's counters are replayed in the calls' order.
Nothing is written.

Calls are read with their stored args (redacted values stay redacted: no rule should
turn on a card number); the newest `MAX_CALLS` of the period are examined, and the
report says when there were more."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.utils import timezone

from toolops.models import ToolCall
from toolops.tools import registry

from . import cedar
from . import limits as spend
from .active import Active
from .document import Document
from .verdict import NOT_GRANTED, verdict

MAX_CALLS = 20_000
EXAMPLES = 5
# What a call would have met, in the order the report lists them.
REFUSED, HELD, LIFTED, OVER, WOULD = (
    "refused",
    "held",
    "approval lifted",
    "over a limit",
    "log only",
)
NOT_DONE = (ToolCall.Status.FAILED, ToolCall.Status.REJECTED, ToolCall.Status.SKIPPED)


@dataclass
class Example:
    call_id: str
    run_pk: int
    tool: str
    agent: str
    created_at: datetime


@dataclass
class Finding:
    """One rule's (or limit's, or the grants') effect: how many calls, a few of them."""

    name: str
    kind: str  # "rule", "limit" or "grant"
    outcome: str
    count: int = 0
    examples: list[Example] = field(default_factory=list)

    def add(self, example: Example) -> None:
        self.count += 1
        if len(self.examples) < EXAMPLES:
            self.examples.append(example)


@dataclass
class Simulation:
    days: int
    examined: int
    truncated: bool
    findings: list[Finding]

    @property
    def changed(self) -> int:
        return sum(f.count for f in self.findings)


def simulate(document: Document, *, days: int = 7, now: datetime | None = None) -> Simulation:
    """The draft `document` put to the calls of the last `days` days."""
    now = now or timezone.now()
    draft = Active(version=0, document=document, compiled=cedar.Compiled.of(document))
    calls = list(
        ToolCall.objects.filter(role=ToolCall.Role.CALL, created_at__gte=now - timedelta(days=days))
        .select_related("run__agent")
        .order_by("-created_at")[: MAX_CALLS + 1]
    )
    truncated = len(calls) > MAX_CALLS
    calls = list(reversed(calls[:MAX_CALLS]))
    findings: dict[tuple[str, str, str], Finding] = {}
    spent: dict[tuple[str, int, str, str], int] = defaultdict(int)

    def finding(name: str, kind: str, outcome: str) -> Finding:
        key = (kind, name, outcome)
        if key not in findings:
            findings[key] = Finding(name=name, kind=kind, outcome=outcome)
        return findings[key]

    for call in calls:
        spec = registry.get(call.tool, include_internal=False)
        if spec is None:
            continue
        agent = call.run.agent
        example = Example(call.call_id, call.run_id, call.tool, agent.name, call.created_at)
        args = call.args if isinstance(call.args, dict) else {}
        decided = verdict(
            draft,
            agent=agent.name,
            agent_created=agent.created_at,
            spec=spec,
            args=args,
            now=call.created_at,
        )
        for rule, action in decided.rules:
            if action.startswith("would_"):
                finding(rule, "rule", f"{WOULD} ({action})").add(example)
        if decided.refused_by is not None:
            kind = "grant" if decided.refused_by == NOT_GRANTED else "rule"
            finding(decided.refused_by, kind, REFUSED).add(example)
            continue
        if decided.held_by is not None:
            finding(decided.held_by, "rule", HELD).add(example)
        elif decided.lifted and spec.requires_approval:
            lifting = [r for r, a in decided.rules if a == "no_approval"]
            finding(lifting[0] if lifting else "no_approval", "rule", LIFTED).add(example)
        if call.status in NOT_DONE:
            continue
        for limit, hold in decided.charges:
            key = (limit.name, agent.pk, hold.period, hold.currency)
            if spent[key] + hold.units > spend.cap_units(limit):
                finding(limit.name, "limit", OVER).add(example)
            else:
                spent[key] += hold.units
    return Simulation(
        days=days, examined=len(calls), truncated=truncated, findings=list(findings.values())
    )
