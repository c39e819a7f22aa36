"""Where a figure on the metrics page turns into a highlight: every threshold in one place,
so the page, its tests and docs/metrics.md agree (DESIGN.md "Tracing and metrics")."""

from __future__ import annotations

# Retry amplification above this flags an unstable downstream or broken backoff: every
# other call needed a retry.
AMPLIFICATION_MAX = 1.5

# "Hit rate rising": the last hour's idempotency hit rate against the 23 hours before it.
# Rising means all three: enough requests in the hour for a rate to mean something, at
# least HIT_RATE_RISE_FACTOR times the earlier rate, and HIT_RATE_RISE_POINTS above it
# (so 1% → 3% on a quiet tool is not news, and a steady 40% does not flag at all).
HIT_RATE_MIN_REQUESTS = 20
HIT_RATE_RISE_FACTOR = 2.0
HIT_RATE_RISE_POINTS = 0.10


def amplification_high(amplification: float | None) -> bool:
    return amplification is not None and amplification > AMPLIFICATION_MAX


def hit_rate_rising(*, hour_requests: int, hour_rate: float | None, before: float | None) -> bool:
    """`before`: the rate over the 23 hours before the last hour (None: no requests then,
    which counts as 0 — replays starting from nothing are the clearest rise)."""
    if hour_rate is None or hour_requests < HIT_RATE_MIN_REQUESTS:
        return False
    base = before or 0.0
    return hour_rate >= base * HIT_RATE_RISE_FACTOR and hour_rate - base >= HIT_RATE_RISE_POINTS


def breaker_open(level: int) -> bool:
    """`level` as in toolops_breaker_state: 2 is open (calls refused now)."""
    return level == 2
