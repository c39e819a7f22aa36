"""Waiting for a call's outcome (API.md `wait`, ≤ 30 s): a call held for a person or in
progress is looked at again, ever less often, until it no longer waits or the time is
up. For callers without an event loop (the pipeline's own `wait`, the test client); the
served API and the MCP server wait on their event loops instead (toolops/api/longpoll.py),
with the same pauses, each look also reading whether the request's token still stands."""

from __future__ import annotations

import time

from toolops.models import Approval, ToolCall

# A long-poll looks again after each of these pauses (then every LONG_POLL_PAUSES[-1] s).
LONG_POLL_PAUSES = (0.05, 0.075, 0.11, 0.17, 0.25, 0.38, 0.5)


def wait_for(*, call: ToolCall, seconds: float) -> ToolCall:
    """Hold this thread while the call is pending_approval or in_progress."""
    deadline = time.monotonic() + seconds
    looks = 0
    while call.is_waiting and time.monotonic() < deadline:
        pause = LONG_POLL_PAUSES[min(looks, len(LONG_POLL_PAUSES) - 1)]
        time.sleep(min(pause, max(0.0, deadline - time.monotonic())))
        looks += 1
        call.refresh_from_db()
    return wait_ended(call=call)


def wait_ended(*, call: ToolCall) -> ToolCall:
    """The call as a long-poll answers it."""
    if call.approval_id:
        # refresh_from_db keeps a related object it already holds: read the decision anew.
        call.approval = Approval.objects.select_related("decided_by", "duplicate_of").get(
            pk=call.approval_id
        )
    return call
