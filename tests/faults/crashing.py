"""Helpers for the crash-point tests: a process started with TOOLOPS_CRASH_AT must die by
SIGKILL at its point, and the ones started after it must leave everything consistent."""

from __future__ import annotations

import signal
import subprocess
from typing import Any

import pytest

from tests.waiting import wait_until
from tests.worker import Worker
from toolops.models import IdempotencyRecord, ToolCall

# Short leases and sweeps: a dead holder's claim lapses after max(1 s, timeout_s + 1) = 3 s
# (the demo tools' timeout is 2 s), and the worker looks for it twice a second.
FAST = {
    "TOOLOPS_CLAIM_LEASE_S": "1",
    "TOOLOPS_CLAIM_SWEEP_S": "0.5",
    "TOOLOPS_COMPENSATION_SWEEP_S": "0.5",
    "TOOLOPS_COMPENSATION_GRACE_S": "1",
    "TOOLOPS_APPROVAL_SWEEP_S": "0.5",
    "TOOLOPS_APPROVAL_GRACE_S": "1",
}
SETTLE_WITHIN_S = 30.0


def killed(proc: subprocess.Popen[Any], within: float = SETTLE_WITHIN_S) -> None:
    """`proc` dies within `within` s, by SIGKILL (its crash point), not by an error."""
    wait_until(lambda: proc.poll() is not None, within, failure="the process is still alive")
    assert proc.returncode == -signal.SIGKILL, f"exited {proc.returncode}, not by SIGKILL"


def worker_killed_at(w: Worker, point: str) -> None:
    """The worker died by SIGKILL at `point`, saying so. Its beat process goes with it,
    and so do the messages still queued (a wake-up a sweep sent twice would otherwise
    hand the next worker its work): what is left to do is found in the database only."""
    killed(w.proc)
    assert f"toolops: crash point {point} reached; killing process {w.proc.pid}" in w.output()
    w.kill()  # the rest of its process group (embedded beat), as a host's restart would
    for message in (w.data_dir / "broker" / "out").glob("*.msg"):
        message.unlink(missing_ok=True)


def final(call_id: str) -> ToolCall | None:
    """The call once it has a final status (anything but in progress or unknown)."""
    call = ToolCall.objects.get(call_id=call_id)
    waiting = (ToolCall.Status.IN_PROGRESS, ToolCall.Status.UNKNOWN)
    return None if call.status in waiting else call


def settled(call_id: str, w: Worker) -> ToolCall:
    """Wait for the call's final status; fail with the worker's output if none comes."""

    def done() -> ToolCall | None:
        if w.proc.poll() is not None:
            pytest.fail(f"the worker exited ({w.proc.returncode}):\n{w.output()}")
        return final(call_id)

    return wait_until(done, SETTLE_WITHIN_S, every=0.1, failure=lambda: w.output())


def record_of(call: ToolCall) -> IdempotencyRecord:
    return IdempotencyRecord.objects.get(key=call.idempotency_key)
