"""A real Celery worker with beat embedded settles an unknown outcome on its own
(API.md: "With a healthy query tool an unknown call settles within 30 s")."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import suppress
from pathlib import Path

import pytest
from rest_framework.test import APIClient

from tests.conftest import ROOT, Shop, server_env
from tests.demo.launcher import processes_with_env
from tests.toolops.executor.helpers import allow_without_approval, call_ok, get_run, start_run
from toolops.models import Attempt, ToolCall

ORDER = {"sku": "A12", "qty": 1, "amount": "19.90"}
SETTLE_WITHIN_S = 30.0


class Worker:
    """`celery -A toolops worker -B` on the test database, with a private broker."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.log = data_dir / "worker.log"
        data_dir.mkdir(parents=True, exist_ok=True)
        env = server_env(TOOLOPS_DATA_DIR=str(data_dir), PYTHONUNBUFFERED="1")
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "celery", "-A", "toolops", "worker", "-B",
                 "--pool", "threads", "--concurrency", "2", "--loglevel", "warning"],
                cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT,
                # Its own process group, so that stopping it reaches its beat process too.
                start_new_session=True,
            )  # fmt: skip
        self.started = time.monotonic()

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self) -> int | None:
        """Warm shutdown (SIGTERM to the worker's group), SIGKILL after 15 s."""
        if self.proc.poll() is None:
            with suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                with suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        # The group may outlive its leader for a moment (beat's own process).
        with suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        return self.proc.returncode


@pytest.fixture
def worker(transactional_db: None, shop: Shop, tmp_path: Path) -> Iterator[Callable[[], Worker]]:
    started: list[Worker] = []

    def start() -> Worker:
        w = Worker(tmp_path / "var")
        started.append(w)
        return w

    yield start
    # Stopped before the test database is flushed.
    for w in started:
        w.stop()


def wait_for(condition: Callable[[], bool], timeout: float, worker: Worker) -> float:
    """Seconds it took; fails with the worker's output when it does not happen in time."""
    started = time.monotonic()
    while not condition():
        if worker.proc.poll() is not None:
            pytest.fail(f"the worker exited ({worker.proc.returncode}):\n{worker.output()}")
        if time.monotonic() - started > timeout:
            pytest.fail(f"not settled within {timeout:g} s; worker output:\n{worker.output()}")
        time.sleep(0.25)
    return time.monotonic() - started


def test_the_worker_settles_an_unknown_order_once_the_query_answers(
    worker: Callable[[], Worker], api: APIClient, shop: Shop
) -> None:
    allow_without_approval("create_order")
    start_run(api)
    shop.fault("/orders", drop_after_commit=1)
    shop.fault("/orders/lookup", fail_next=10_000, fail_status=500)
    call = call_ok(api, step_index=1, tool="create_order", args=ORDER)
    assert call["status"] == "unknown", call
    row = ToolCall.objects.get(call_id=call["call_id"])
    assert row.next_reconcile_at is not None
    [order] = shop.state()["orders"]
    shop.fault("/orders/lookup")
    lookups_before = len(shop.requests("/orders/lookup"))

    w = worker()
    took = wait_for(
        lambda: ToolCall.objects.filter(pk=row.pk, status="succeeded").exists(),
        SETTLE_WITHIN_S, w,
    )  # fmt: skip

    row.refresh_from_db()
    assert row.result["order_id"] == order["order_id"]
    assert row.next_reconcile_at is None
    assert row.finished_at is not None
    # The worker asked query_order by the call's client reference; it ordered nothing.
    lookups = shop.requests("/orders/lookup")[lookups_before:]
    assert lookups, "the worker settled the call without asking query_order"
    assert {r["body"]["client_reference"] for r in lookups} == {row.client_reference}
    assert lookups[-1]["status"] == 200
    assert len(shop.requests("/orders")) == 1
    assert shop.state()["counts"]["orders"] == 1
    assert Attempt.objects.filter(call=row, purpose="reconcile", http_status=200).count() == 1
    answer = get_run(api)["calls"][0]
    assert answer["status"] == "succeeded"
    assert answer["result"]["order_id"] == order["order_id"]
    assert took <= SETTLE_WITHIN_S

    assert w.stop() is not None
    assert processes_with_env("TOOLOPS_DATA_DIR", str(w.data_dir)) == []
