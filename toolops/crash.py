"""Named crash points, for fault tests only: `crash_point("after-claim")` kills this
process with SIGKILL — no cleanup, no atexit, no flushed buffers, as a power cut or the
kernel's OOM killer would — when TOOLOPS_CRASH_AT names that point. Unset (every
deployment), a crash point costs one attribute check.

TOOLOPS_CRASH_AT is a comma-separated list of `name` (crash at its first hit) or
`name@P` (crash with probability P at each hit, 0 < P ≤ 1; TOOLOPS_CRASH_SEED makes the
draws repeatable). It is read once, by the settings (toolops/conf/faults.py), which
refuse an unknown name or a bad probability at start-up; the app arms it (apps.py).
`manage.py check` warns when it is set without DEBUG (toolops.W011)."""

from __future__ import annotations

import os
import random
import signal

from django.core.exceptions import ImproperlyConfigured

# Each point, and the moment it stands for (docs/reliability.md: what recovers it).
POINTS: dict[str, str] = {
    "after-claim": "a call's claim is committed; its first attempt has not gone out",
    "after-answer": "the downstream answered an attempt; its outcome is not recorded",
    "mid-compensation": "an undo call is recorded; its compensation is not settled",
    "after-decision": "an approved call's start is committed; nothing is sent yet",
    "mid-sweep": "the stale-claim sweep took a claim over; it is not settled",
}


def crash_plan(raw: str) -> dict[str, float]:
    """TOOLOPS_CRASH_AT as {point: probability per hit}; {} when unset."""
    plan: dict[str, float] = {}
    for item in (part.strip() for part in raw.split(",")):
        if not item:
            continue
        name, at, chance = item.partition("@")
        name = name.strip()
        if name not in POINTS:
            raise ImproperlyConfigured(
                f"TOOLOPS_CRASH_AT names an unknown crash point {name!r}; "
                f"the crash points are: {', '.join(POINTS)}"
            )
        plan[name] = _probability(item, chance.strip()) if at else 1.0
    return plan


def _probability(item: str, raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not 0 < value <= 1:  # also refuses nan and inf
        raise ImproperlyConfigured(
            f"TOOLOPS_CRASH_AT item {item!r}: the probability after '@' must be a number "
            f"above 0 and at most 1, got {raw!r}"
        )
    return value


class _Armed:
    def __init__(self, plan: dict[str, float], seed: int | None) -> None:
        self.plan = plan
        self.random = random.Random(seed)

    def hit(self, name: str) -> None:
        chance = self.plan.get(name)
        if chance is None or (chance < 1 and self.random.random() >= chance):
            return
        pid = os.getpid()
        # Written straight to the file descriptor: nothing buffered survives a SIGKILL.
        os.write(2, f"toolops: crash point {name} reached; killing process {pid}\n".encode())
        os.kill(pid, signal.SIGKILL)


_armed: _Armed | None = None


def arm(plan: dict[str, float], *, seed: int | None = None) -> None:
    """Crash at the points of `plan` (crash_plan's answer) from now on; {}: never."""
    global _armed  # noqa: PLW0603 - one per process, set at start-up
    _armed = _Armed(plan, seed) if plan else None
    if plan:
        points = ", ".join(f"{n}@{p:g}" for n, p in plan.items())
        os.write(2, f"toolops: crash points armed (TOOLOPS_CRASH_AT): {points}\n".encode())


def crash_point(name: str) -> None:
    """Kill this process here when TOOLOPS_CRASH_AT names `name` (one of POINTS)."""
    if _armed is not None:
        _armed.hit(name)
