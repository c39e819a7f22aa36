"""A worker's warm shutdown (SIGTERM, as a deploy stops one): the undo it is running is
finished, not dropped mid-request and not left for the claim's lease; what it had not
started is done by the next worker, each undo sent once (README "Celery, and why")."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from compensations.models import Compensation
from tests.compensations.test_saga_worker import (
    FAST_SWEEP,
    SETTLE_WITHIN_S,
    UNDO_PATHS,
    StartWorker,
    abort,
    buy,
    ended,
    undo_requests,
)
from tests.conftest import Shop
from tests.worker import wait_for
from toolops.models import Run

pytestmark = pytest.mark.usefixtures("lost_messages")  # only the worker's sweep finds work


def test_a_worker_given_sigterm_finishes_the_undo_it_is_running(
    worker: StartWorker, api: APIClient, shop: Shop
) -> None:
    buy(api)
    for path in UNDO_PATHS:  # each undo takes a while: SIGTERM lands mid-request
        shop.fault(path, latency_ms=1500)
    abort(api)
    first = worker(**FAST_SWEEP)
    wait_for(lambda: bool(undo_requests(shop)), SETTLE_WITHIN_S, first)

    assert first.stop() == 0, first.output()  # warm: it exits by itself, not killed
    # Every undo it sent, the one in flight at the signal included, it saw through and
    # recorded; none is left running for a lease to expire.
    done = Compensation.objects.filter(status=Compensation.Status.SUCCEEDED).count()
    assert done == len(undo_requests(shop)) >= 1, first.output()
    assert not Compensation.objects.filter(status=Compensation.Status.RUNNING).exists()

    second = worker(**FAST_SWEEP)
    wait_for(ended(), SETTLE_WITHIN_S, second)
    assert Run.objects.get(run_id="r-1").status == Run.Status.ABORTED
    assert set(Compensation.objects.values_list("status", flat=True)) == {"succeeded"}
    # Each undo reached the shop once: none resent after the shutdown.
    assert sorted(r["path"] for r in undo_requests(shop)) == sorted(UNDO_PATHS)
