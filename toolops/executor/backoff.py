"""Exponential backoff with full jitter, capped, honouring Retry-After."""

from __future__ import annotations

import random


def ceiling(*, retry_number: int, base_s: float, cap_s: float) -> float:
    """The most we may wait before retry `retry_number` (1 for the first retry)."""
    return min(cap_s, base_s * 2 ** (retry_number - 1))


def delay(
    *,
    retry_number: int,
    base_s: float,
    cap_s: float,
    retry_after: float | None = None,
    jitter: str = "full",
) -> float:
    """Full jitter spreads retrying clients apart; a server's Retry-After is a floor.
    Equal jitter (half the ceiling, plus up to half again) keeps each wait at least as
    long as the last: for a lone worker retrying an undo, where growing waits matter
    more than spreading a herd."""
    top = ceiling(retry_number=retry_number, base_s=base_s, cap_s=cap_s)
    wait = random.uniform(0.0, top) if jitter == "full" else random.uniform(top / 2, top)
    if retry_after is not None:
        wait = max(wait, retry_after)
    return wait
