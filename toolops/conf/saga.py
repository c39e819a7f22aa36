"""Settings: the saga worker (docs/compensations.md) — when the sweep steps in, and how
long a queued undo waits for its tool's breaker."""

from __future__ import annotations

from toolops.envs import envfloat

# A queued compensation nobody picked up within this is woken again by the sweep.
TOOLOPS_COMPENSATION_GRACE_S = envfloat("TOOLOPS_COMPENSATION_GRACE_S", 10.0)
# A queued undo whose tool's breaker is open waits for it (the breaker's cool-down, or
# the probe under way) rather than be refused unsent; after this long since it was
# queued it is sent anyway, and a refusal dead-letters it again with the reason.
TOOLOPS_COMPENSATION_BREAKER_WAIT_S = envfloat("TOOLOPS_COMPENSATION_BREAKER_WAIT_S", 900.0)
