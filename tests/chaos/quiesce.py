"""Waiting for the stack to go quiet after the faults healed: no call in progress or
unknown with a query to settle it, no open compensation of an ending run, no run aborting.
Polled with a deadline; the checker runs either way and names what is left."""

from __future__ import annotations

import time


def busy() -> int:
    from compensations.models import Compensation
    from toolops.models import Run, ToolCall

    return (
        ToolCall.objects.filter(status="in_progress").count()
        + ToolCall.objects.filter(status="unknown", tool__in=["create_order", "charge"]).count()
        + Compensation.objects.filter(status__in=["pending", "running"]).count()
        + Run.objects.filter(status="aborting").count()
    )


def wait(timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if busy() == 0:
            return True
        time.sleep(1.0)
    return False
