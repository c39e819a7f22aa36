"""Fault injection: latency, errors, 429 bursts, hangs and replies lost after the commit,
set per path at run time through ``POST /_shop/faults``.

A `Fault` is what is set on a path; a `Plan` is what it decided for one request when the
request arrived, so each request plays out the fault it met on arrival.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, fields
from decimal import Decimal
from typing import Any

from toolops.demo.shop.replies import JSON, Invalid, Reply, text_field


@dataclass
class Plan:
    """What the fault table decided for one request, fixed when it arrived."""

    latency_s: float = 0.0
    fault: str | None = None
    status: int | None = None  # answer this at once, without effect
    retry_after: float | None = None
    hang_s: float | None = None  # hang without effect, then drop the connection
    hang_after_commit_s: float = 0.0
    drop_after_commit: bool = False
    status_after_commit: int | None = None


@dataclass
class Fault:
    """The fault set on one path. Counters are decremented as requests consume them."""

    latency_ms: int = 0
    fail_next: int = 0
    fail_status: int | None = None
    retry_after: float | None = None
    error_rate: float = 0.0
    burst_429: int = 0
    timeout_next: int = 0
    hang_s: float = 30.0
    drop_after_commit: int = 0
    commit_then_status: int = 0
    hang_after_commit_s: float = 0.0

    def take(self, rng: random.Random) -> Plan:
        """Decide one request's fate; the caller holds the fault lock."""
        plan = Plan(latency_s=self.latency_ms / 1000)
        # Only the first fault that fires is consumed, so counters play out one after another.
        if self.fail_next > 0:
            self.fail_next -= 1
            return self._refuse(plan, "fail_next", self.fail_status or 503, self.retry_after)
        if self.error_rate and rng.random() < self.error_rate:
            return self._refuse(plan, "error_rate", self.fail_status or 503, self.retry_after)
        if self.burst_429 > 0:
            self.burst_429 -= 1
            retry_after = 1.0 if self.retry_after is None else self.retry_after
            return self._refuse(plan, "burst_429", 429, retry_after)
        if self.timeout_next > 0:
            self.timeout_next -= 1
            plan.fault, plan.hang_s = "timeout_next", self.hang_s
            return plan
        if self.hang_after_commit_s:
            plan.fault, plan.hang_after_commit_s = "hang_after_commit_s", self.hang_after_commit_s
        if self.drop_after_commit > 0:
            self.drop_after_commit -= 1
            plan.fault, plan.drop_after_commit = "drop_after_commit", True
        elif self.commit_then_status > 0:
            self.commit_then_status -= 1
            plan.fault, plan.status_after_commit = "commit_then_status", self.fail_status or 502
        return plan

    def is_spent(self) -> bool:
        """Nothing left to apply: every counter used up and no rate, latency or hang."""
        return not (
            self.latency_ms
            or self.fail_next
            or self.error_rate
            or self.burst_429
            or self.timeout_next
            or self.drop_after_commit
            or self.commit_then_status
            or self.hang_after_commit_s
        )

    @staticmethod
    def _refuse(plan: Plan, name: str, status: int, retry_after: float | None) -> Plan:
        plan.fault, plan.status, plan.retry_after = name, status, retry_after
        return plan


# name -> (type, minimum, maximum) for POST /_shop/faults
FAULT_FIELDS: dict[str, tuple[type, float, float]] = {
    "latency_ms": (int, 0, 600_000),
    "fail_next": (int, 0, 1_000_000),
    "fail_status": (int, 100, 599),
    "retry_after": (float, 0, 86_400),
    "error_rate": (float, 0, 1),
    "burst_429": (int, 0, 1_000_000),
    "timeout_next": (int, 0, 1_000_000),
    "hang_s": (float, 0, 3_600),
    "drop_after_commit": (int, 0, 1_000_000),
    "commit_then_status": (int, 0, 1_000_000),
    "hang_after_commit_s": (float, 0, 3_600),
}


def _fault_value(name: str, value: Any) -> int | float:
    kind, low, high = FAULT_FIELDS[name]
    if isinstance(value, bool) or not isinstance(value, int | Decimal):
        raise Invalid(name, "must be a number")
    if kind is int and value != int(value):
        raise Invalid(name, "must be an integer")
    number = int(value) if kind is int else float(value)
    if not low <= number <= high:
        raise Invalid(name, f"must be between {low:g} and {high:g}")
    return number


def parse_fault(body: JSON) -> tuple[str, Fault | None]:
    """Validate a POST /_shop/faults body; a path alone (or only nulls) clears the fault."""
    path = text_field(body, "path")
    if not path.startswith("/") or path.startswith("/_shop/"):
        raise Invalid("path", "must be a business path such as /orders")
    unknown = sorted(set(body) - set(FAULT_FIELDS) - {"path"})
    if unknown:
        raise Invalid(unknown[0], f"unknown fault field; known: {', '.join(FAULT_FIELDS)}")
    # Each value has its field's type (FAULT_FIELDS), which one dict type cannot say.
    given: dict[str, Any] = {
        name: _fault_value(name, value)
        for name, value in body.items()
        if name in FAULT_FIELDS and value is not None
    }
    return path, (Fault(**given) if given else None)


def fault_json(fault: Fault) -> JSON:
    return {f.name: getattr(fault, f.name) for f in fields(Fault)}


def fault_reply(plan: Plan) -> Reply:
    headers = {}
    if plan.retry_after is not None:
        # Whole seconds where possible; RFC 9110 only allows integers there.
        seconds = plan.retry_after
        headers["Retry-After"] = str(int(seconds)) if seconds == int(seconds) else f"{seconds:g}"
    error = "rate_limited" if plan.status == 429 else "injected_fault"
    return Reply(plan.status or 503, {"error": error, "fault": plan.fault}, headers)
