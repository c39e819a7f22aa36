"""Fairness counted in work, not only in requests (API.md, Conventions: one agent cannot
slow another).

The rate limit counts requests, and every request costs it the same; but what a call
costs the server grows with its args. Sixteen streams of bodies with ~100,000 keys each,
far under the rate limit, kept a web process's CPU busy and took another agent's
`GET /tools` from 25 ms to seconds. So each agent's request bodies are priced, and paid
from a budget of its own:

- The price is read off the body's bytes before anything parses it: one unit for each
  value the body can hold (toolops.jsonbound.values_at_most: commas, colons and opening
  brackets) and one for each 64 bytes (a long string costs its scans and its storage). It
  is an upper bound, C-fast to count, and what the schema check, the canonical form and
  the key then cost grows with it.
- The budget is a token bucket: it refills at TOOLOPS_AGENT_WORK_PER_S units a second up
  to TOOLOPS_AGENT_WORK_BURST. A request is let in while the agent's budget is above
  zero and its price is then taken, even past zero; an agent in debt gets 429 with
  Retry-After (the seconds until it is out of debt) before its body is parsed, taking
  no thread and no database work. One expensive body passes — the JSON widths bound what
  one can cost — and the next ones wait their turn.

Ordinary calls price at a few dozen units: an agent would need thousands of calls a
second to feel the budget. Counted per web process, on its event loop (no lock): the work
it guards is that process's CPU, and a balancer spreads an agent's requests over the
processes, each of which protects itself."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

from django.conf import settings

from toolops import jsonbound
from toolops.refusals import send_problem

BYTES_PER_UNIT = 64
# Agents remembered at most; past it the ones whose budgets are full again are dropped
# (a full budget is what a forgotten agent starts with).
MAX_AGENTS = 10_000


def price(body: bytes) -> int:
    """What a body costs, in units."""
    if not body:
        return 0
    return jsonbound.values_at_most(body) + len(body) // BYTES_PER_UNIT


class WorkBudget:
    """Each agent's budget in this process, keyed by its token's digest (no lookup needed
    to know whose request it is; a wrong token gets its own budget, then its 401)."""

    def __init__(
        self, *, per_s: float, burst: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.per_s = per_s
        self.burst = burst
        self.clock = clock
        # key → (units left, when that was so); missing: a full budget.
        self.left: dict[str, tuple[float, float]] = {}

    def _now_left(self, key: str, now: float) -> float:
        hit = self.left.get(key)
        if hit is None:
            return self.burst
        units, then = hit
        return min(self.burst, units + (now - then) * self.per_s)

    def owed_s(self, key: str) -> float:
        """0 when the agent may send a request now; else the seconds until it may."""
        left = self._now_left(key, self.clock())
        return 0.0 if left > 0 else (-left + 1) / self.per_s

    def charge(self, key: str, units: int) -> None:
        if not units:
            return
        now = self.clock()
        left = self._now_left(key, now) - units
        if len(self.left) >= MAX_AGENTS and key not in self.left:
            self._forget_full(now)
        self.left[key] = (left, now)

    def _forget_full(self, now: float) -> None:
        full = [k for k in self.left if self._now_left(k, now) >= self.burst]
        for key in full:
            del self.left[key]
        if len(self.left) >= MAX_AGENTS:  # every one in debt: keep the deepest debts
            ranked = sorted(self.left, key=lambda k: self._now_left(k, now))
            for key in ranked[MAX_AGENTS // 2 :]:
                del self.left[key]


_budget: WorkBudget | None = None


def budget() -> WorkBudget:
    """This process's budgets (API and MCP requests of one agent share one)."""
    global _budget
    if _budget is None:
        _budget = WorkBudget(
            per_s=settings.TOOLOPS_AGENT_WORK_PER_S, burst=settings.TOOLOPS_AGENT_WORK_BURST
        )
    return _budget


def metered(receive: Any, key: str, work: WorkBudget) -> Any:
    """`receive`, charging the agent for each body chunk as it is read."""

    async def receive_metered() -> dict[str, Any]:
        message = await receive()
        if message.get("type") == "http.request":
            work.charge(key, price(message.get("body", b"")))
        return message

    return receive_metered


async def refuse(send: Any, owed_s: float) -> None:
    """429 with Retry-After and a problem body (RFC 9457)."""
    wait = max(1, math.ceil(owed_s))
    detail = (
        f"This agent's recent requests carried more work than its share of this server "
        f"(TOOLOPS_AGENT_WORK_PER_S: their bodies' JSON values and size); retry after "
        f"{wait} s, or send smaller args."
    )
    await send_problem(send, 429, detail, headers=[(b"retry-after", str(wait).encode())])
