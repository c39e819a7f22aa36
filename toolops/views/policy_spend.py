"""What each agent has spent under the active policy's limits this period, as the console
shows it: the policy page's limits, the agents page, and the home's "near its spend
limit" (toolops/views/attention.py).

Every reading is one query on the spend counters (toolops/policy/limits.py keeps them),
whatever the number of agents and limits: a row per agent, limit, period and currency,
of the limits' current periods only. A counter left from an earlier version whose limit
no longer covers the agent is not shown: it counts nothing now."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from math import ceil

from django.db.models import Q

from toolops.policy import limits as spend
from toolops.policy import wording
from toolops.policy.document import Limit, matches
from toolops.policy.models import SpendCounter

# The home lists an agent from this share of a limit on (toolops/views/attention.py).
NEAR = 0.8
# The most counter rows one look at the home reads, however many agents are near.
NEAR_ROWS = 200
IN_PERIOD = {"day": "today", "week": "this week", "month": "this month", "total": "in total"}


@dataclass(frozen=True)
class Spent:
    """One agent's spending under one limit this period, in one currency."""

    agent_id: int
    agent: str
    limit: Limit
    currency: str
    units: int

    @property
    def spent(self) -> str:
        """ "480.00 EUR", "3 calls"."""
        return wording.amount(self.limit, spend.shown(self.limit, self.units), self.currency)

    @property
    def max(self) -> str:
        cap = spend.shown(self.limit, spend.cap_units(self.limit))
        return wording.amount(self.limit, cap, self.currency)

    @property
    def share(self) -> float:
        """How much of the max is spent (1.0 = all of it; a max of 0 is always full)."""
        cap = spend.cap_units(self.limit)
        return self.units / cap if cap else 1.0

    @property
    def percent(self) -> int:
        return int(self.share * 100)

    @property
    def in_period(self) -> str:
        return IN_PERIOD[self.limit.per]


def nothing_spent(limit: Limit, agent_id: int, agent: str) -> Spent:
    return Spent(agent_id=agent_id, agent=agent, limit=limit, currency="", units=0)


def spent_now(
    limits: Sequence[Limit], *, share: float = 0.0, now: datetime | None = None
) -> list[Spent]:
    """Every agent's spending under `limits` in their current periods (one query), those
    at `share` of their max or more when given; the fullest first."""
    if not limits:
        return []
    by_name = {limit.name: limit for limit in limits}
    wanted = Q()
    for limit in limits:
        wanted |= _counter_filter(limit, share, now)
    rows = (
        SpendCounter.objects.filter(wanted)
        .select_related("agent")
        .only("agent", "agent__name", "limit", "currency", "spent")
        .order_by("-spent", "pk")
    )
    if share:
        rows = rows[:NEAR_ROWS]
    found = [
        Spent(row.agent_id, row.agent.name, by_name[row.limit], row.currency, row.spent)
        for row in rows
        if matches(by_name[row.limit].agents, row.agent.name)
    ]
    return sorted(found, key=lambda s: (-s.share, s.agent, s.limit.name, s.currency))


def _counter_filter(limit: Limit, share: float, now: datetime | None) -> Q:
    found = Q(limit=limit.name, period=spend.period(limit, now).key)
    if share:
        # At least one unit, so an agent never counts as near a limit of 0 it never used.
        found &= Q(spent__gte=max(1, ceil(spend.cap_units(limit) * share)))
    return found


def resets_words(limit: Limit, now: datetime | None = None) -> str:
    """ "it resets at 00:00 UTC", "it never resets"."""
    return wording.resets(limit, spend.period(limit, now).resets_at)
