"""Exponential backoff with full jitter, capped, honouring Retry-After."""

from __future__ import annotations

import random


def ceiling(*, retry_number: int, base_s: float, cap_s: float) -> float:
    """The most we may wait before retry `retry_number` (1 for the first retry)."""
    return min(cap_s, base_s * 2 ** (retry_number - 1))


def delay(
    *, retry_number: int, base_s: float, cap_s: float, retry_after: float | None = None
) -> float:
    """Full jitter spreads retrying clients apart; a server's Retry-After is a floor."""
    wait = random.uniform(0.0, ceiling(retry_number=retry_number, base_s=base_s, cap_s=cap_s))
    if retry_after is not None:
        wait = max(wait, retry_after)
    return wait
