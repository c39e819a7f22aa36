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
    "growing" (a lone worker retrying an undo, where steadily growing waits matter more
    than spreading a herd) waits between the ceiling and twice it, capped: from `base_s`
    (1–2 s, then 2–4 s, …), each at least as long as the last, and Retry-After capped
    too — an undo does not sleep for an hour inside its task."""
    if jitter == "full":
        top = ceiling(retry_number=retry_number, base_s=base_s, cap_s=cap_s)
        wait = random.uniform(0.0, top)
    else:
        low = ceiling(retry_number=retry_number, base_s=base_s, cap_s=cap_s)
        wait = random.uniform(low, min(cap_s, 2 * low))
        if retry_after is not None:
            retry_after = min(retry_after, cap_s)
    if retry_after is not None:
        wait = max(wait, retry_after)
    return wait
