"""Clock skew of ±5 s between a web process and a worker (issue 18): the worker's clock
runs 5 s ahead or behind, this test process's (which holds the calls, as a web process
does) true. A deadline one process writes and another judges is judged by the
database's clock (toolops/dbclock.py), so a worker whose clock is off neither expires an
approval early nor lets it live on past its time.

The worker's clock is shifted by tests/faults/skewclock/sitecustomize.py, which moves
django.utils.timezone.now (every time ToolOps reads) by TOOLOPS_TEST_CLOCK_OFFSET_S.
libfaketime (LD_PRELOAD, FAKETIME=+5s) would shift the whole process, but with Debian's
0.9.10 a Python thread's timed wait (threading.Event.wait) never returns, and with the
monotonic clock left alone time.sleep fails with EINVAL: a Celery worker cannot run
under it."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from rest_framework.test import APIClient

from tests.conftest import Shop
from tests.toolops.api.helpers import body, create_run, post_call
from tests.worker import Worker, wait_for
from toolops.models import Approval, ToolCall, ToolPolicy

SKEWCLOCK = Path(__file__).resolve().parent / "skewclock"
FAST = {"TOOLOPS_APPROVAL_SWEEP_S": "0.5", "TOOLOPS_APPROVAL_GRACE_S": "1"}
TTL_S = 8
ORDER = {"sku": "A12", "qty": 1, "amount": "19.90"}
CHARGE = {"order_id": "ord-9", "amount": "199.00"}


def skewed(offset_s: float) -> dict[str, str]:
    """A process whose application clock is `offset_s` seconds off."""
    path = os.pathsep.join(p for p in (str(SKEWCLOCK), os.environ.get("PYTHONPATH", "")) if p)
    return {"PYTHONPATH": path, "TOOLOPS_TEST_CLOCK_OFFSET_S": str(offset_s)}


def hold(api: APIClient, step: int, tool: str, args: dict[str, object]) -> str:
    response = post_call(api, step_index=step, tool=tool, args=args)
    assert response.status_code == 202, response.content
    return str(body(response)["call_id"])


def status(call_id: str) -> str:
    return str(ToolCall.objects.get(call_id=call_id).status)


@pytest.mark.parametrize("offset", [5.0, -5.0])
def test_a_worker_whose_clock_is_off_expires_an_approval_on_time(
    worker: Callable[..., Worker], api: APIClient, shop: Shop, offset: float
) -> None:
    ToolPolicy.objects.create(tool="create_order", approval_ttl_s=1)
    ToolPolicy.objects.create(tool="charge", approval_ttl_s=TTL_S)
    create_run(api)
    w = worker(**FAST, **skewed(offset))
    # The worker is up and sweeping once a first approval, due at once, has expired.
    probe = hold(api, 1, "create_order", ORDER)
    wait_for(lambda: status(probe) == "rejected", 30, w)

    charge = hold(api, 2, "charge", CHARGE)
    held = time.monotonic()
    wait_for(lambda: status(charge) == "rejected", TTL_S + 20, w)
    took = time.monotonic() - held

    assert Approval.objects.get(tool="charge").status == "expired"
    # Not early (a worker 5 s ahead), nor 5 s late (a worker 5 s behind): its sweep runs
    # every 0.5 s.
    assert TTL_S - 0.5 <= took <= TTL_S + 3, f"expired after {took:.1f} s, not {TTL_S} s"
    assert shop.requests() == []
