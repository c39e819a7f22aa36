"""The policy's sentences: for the model (a limit reached, a call not permitted) and for
people (a rule, a limit), one wording wherever they are shown."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

from .document import Limit, Rule

PER = {"day": "Daily", "week": "Weekly", "month": "Monthly", "total": "Total"}
ACTION_WORDS = {
    "approve": "waits for a reviewer",
    "approve_by_two": "waits for two reviewers",
    "refuse": "is refused",
    "no_approval": "runs without the catalog's approval",
}


def resets(limit: Limit, resets_at: datetime | None) -> str:
    """ "it resets at 00:00 UTC" — in the limit's own time zone."""
    if resets_at is None:
        return "it never resets"
    local = resets_at.astimezone(ZoneInfo(limit.time_zone))
    clock = f"{local:%H:%M} {limit.time_zone}"
    if limit.per == "day":
        return f"it resets at {clock}"
    if limit.per == "week":
        return f"it resets on Monday at {clock}"
    return f"it resets on {local.day} {local:%B} at {clock}"


def amount(limit: Limit, value: int | str, currency: str) -> str:
    if limit.counts:
        return f"{value} call{'s' if value != 1 else ''}"
    return f"{value} {currency}" if currency else f"{value}"


def limit_reached(
    limit: Limit,
    *,
    tool: str,
    spent: int | str,
    cap: int | str,
    currency: str,
    resets_at: datetime | None,
    held: bool,
) -> str:
    """ "Daily limit of 500.00 EUR for charge reached (480.00 spent); it resets at 00:00
    UTC. Ask the user or stop." """
    used = f"{spent} made" if limit.counts else f"{spent} spent"
    first = (
        f"{PER[limit.per]} limit {limit.name!r} of {amount(limit, cap, currency)} for {tool} "
        f"reached ({used}); {resets(limit, resets_at)}."
    )
    if held:
        return f"{first} This call waits for a reviewer to allow it past the limit."
    return f"{first} Ask the user or stop."


def rule_sentence(rule: Rule) -> str:
    """A rule as people read it: "A call of charge by any agent waits for a reviewer when
    its condition holds." (the condition itself is shown beside it, as written)."""
    who = "any agent" if "*" in rule.agents else ", ".join(rule.agents)
    tools = "any tool" if "*" in rule.tools else ", ".join(rule.tools)
    mode = " (log only: recorded, not applied)" if rule.log_only else ""
    return f"A call of {tools} by {who} {ACTION_WORDS[rule.action]} when its condition holds{mode}."


def limit_sentence(limit: Limit) -> str:
    who = "each agent" if "*" in limit.agents else ", ".join(limit.agents)
    tools = "any tool" if "*" in limit.tools else ", ".join(limit.tools)
    what = f"{limit.max} of {limit.sum}" if limit.sum else f"{int(limit.max)} calls"
    period = "in total" if limit.per == "total" else f"per {limit.per} ({limit.time_zone})"
    over = "refused" if limit.on_exceed == "refuse" else "held for a reviewer"
    return f"{who}: at most {what} on {tools} {period}; past it, a call is {over}."
