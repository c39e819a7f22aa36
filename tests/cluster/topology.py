"""The production topology on loopback, for the cross-process tests: the chaos stack
(tests/chaos/stack.py — a fresh PostgreSQL database, a Redis server of its own as broker
and Channels layer, the demo shop, N uvicorn web processes, Celery workers and beat; no
fault proxies) with HAProxy in front (tests/scale/balancer.py), health-checking each web
process. Processes are addressed one by one (`web_urls`) where a test's point is "on one
process … on another", through the balancer (`url`) where it is routing."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import httpx

from tests.chaos.stack import HOST, REVIEWER, Stack
from tests.scale.balancer import Balancer

# What the balancer asks each web process: database, broker, Redis and migrations ready.
READY_PATH = "/readyz"


def database_name(suffix: str) -> str:
    """A database of the test's own, next to the suite's (DATABASE_URL's name)."""
    name = os.environ.get("DATABASE_URL", "postgres:///toolops").rsplit("/", 1)[1]
    return f"{name or 'toolops'}_{suffix}"


class Cluster:
    """`Cluster(workdir, db_name=…, webs=3, workers=1)`: `.start()` returns once every web
    process answers and HAProxy shows each of them UP; `.stop()` stops all of it (also
    when start-up failed half way)."""

    def __init__(
        self,
        workdir: Path,
        *,
        db_name: str,
        webs: int = 3,
        workers: int = 1,
        env: dict[str, str] | None = None,
    ) -> None:
        self.workdir = workdir
        self.stack = Stack(
            workdir,
            db_name=db_name,
            webs=webs,
            workers=workers,
            fault_proxies=False,
            extra_env=env,
        )
        self.balancer: Balancer | None = None

    def start(self) -> None:
        try:
            self.stack.start()
            backends = [(HOST, int(url.rsplit(":", 1)[1])) for url in self.stack.web_urls]
            self.balancer = Balancer(self.workdir / "haproxy", backends, check_path=READY_PATH)
            self.balancer.start()
            self.balancer.wait_up(90)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        if self.balancer is not None:
            self.balancer.stop()
        self.stack.stop()

    # -- what tests use ----------------------------------------------------------------

    @property
    def url(self) -> str:
        """The balancer's address."""
        assert self.balancer is not None, "the cluster is not started"
        return self.balancer.url

    @property
    def web_urls(self) -> list[str]:
        return self.stack.web_urls

    @property
    def shop(self) -> Any:
        """The demo shop's server object (its request log, its faults)."""
        return self.stack.shop

    @property
    def reviewer(self) -> tuple[str, str]:
        return REVIEWER, self.stack.reviewer_password

    def agent(self, index: int = 0) -> httpx.Client:
        """An HTTP client with the bearer token of the stack's agent `index`."""
        token = self.stack.tokens[index]
        return httpx.Client(timeout=40, headers={"Authorization": f"Bearer {token}"})

    def pid(self, name: str) -> int:
        proc = self.stack.procs[name].proc
        assert proc is not None, f"{name} was never started"
        return proc.pid

    def logs(self) -> str:
        """The processes' logs' last lines, for a failing test's message."""
        return "\n".join(f"--- {n}\n{t[-1500:]}" for n, t in self.stack.logs().items())
