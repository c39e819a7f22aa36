"""A real Celery worker process for behaviour tests, and a wait that fails with its
output. The `worker` fixture that starts them lives in tests/conftest.py."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path

import pytest

from tests.conftest import ROOT, server_env
from tests.waiting import wait_until


class Worker:
    """`celery -A toolops worker -B` on the test database, with a private broker under
    `data_dir` (a process started with the same TOOLOPS_DATA_DIR shares it). `env`: extra
    settings, e.g. TOOLOPS_CLAIM_LEASE_S or TOOLOPS_COMPENSATION_SWEEP_S."""

    def __init__(self, data_dir: Path, **env: str) -> None:
        self.data_dir = data_dir
        data_dir.mkdir(parents=True, exist_ok=True)
        # One log per process: a worker started after another one keeps its own output.
        self.log = data_dir / f"worker-{time.monotonic_ns()}.log"
        env = server_env(TOOLOPS_DATA_DIR=str(data_dir), PYTHONUNBUFFERED="1", **env)
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "celery",
                    "-A",
                    "toolops",
                    "worker",
                    "-B",
                    "--pool",
                    "threads",
                    "--concurrency",
                    "2",
                    "--loglevel",
                    "warning",
                ],
                cwd=ROOT,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                # Its own process group, so that stopping it reaches its beat process too.
                start_new_session=True,
            )
        self.started = time.monotonic()

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def kill(self) -> None:
        """SIGKILL the whole group at once: a crash, with no warm shutdown."""
        with suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)

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


def wait_for(condition: Callable[[], bool], timeout: float, worker: Worker) -> float:
    """Seconds it took; fails with the worker's output when it does not happen in time, or
    at once when the worker exits."""
    started = time.monotonic()

    def settled() -> bool:
        if worker.proc.poll() is not None:
            pytest.fail(f"the worker exited ({worker.proc.returncode}):\n{worker.output()}")
        return condition()

    wait_until(settled, timeout, every=0.25, failure=lambda: f"worker output:\n{worker.output()}")
    return time.monotonic() - started
