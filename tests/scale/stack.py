"""The scale stack: the chaos stack (tests/chaos/stack.py) without its fault proxies or
crash points, with PostgreSQL behind pgbouncer in transaction mode and the web
processes behind HAProxy — 3 web processes, 3 workers and beat on a Redis of its own
(broker and Channels layer), and the demo shop."""

from __future__ import annotations

from contextlib import suppress
from pathlib import Path

from tests.chaos.stack import Stack
from tests.scale.balancer import Balancer
from tests.scale.pgbouncer import PgBouncer

DB_NAME = "toolops_scale"
# The balancer's health check: the readiness endpoint (database, broker, Redis, migrations).
CHECK_PATH = "/readyz"


class ScaleStack(Stack):
    def __init__(
        self,
        workdir: Path,
        seed: int = 0,
        *,
        db_name: str = DB_NAME,
        webs: int = 3,
        workers: int = 3,
    ) -> None:
        super().__init__(workdir, seed, db_name=db_name, webs=webs, workers=workers)
        self.pgbouncer = PgBouncer(workdir, db_name)
        self.balancer: Balancer | None = None

    def proxied(self, name: str, port: int) -> int:
        return port  # no fault proxies: the real ports

    def database_port(self) -> int:
        self.pgbouncer.start()
        return self.pgbouncer.port

    def base_env(self, db_port: int, redis_port: int) -> dict[str, str]:
        env = super().base_env(db_port, redis_port)
        # pgbouncer in transaction mode; Debian's is 1.18: no prepared statements.
        env["TOOLOPS_DB_TRANSACTION_POOLING"] = "1"
        env["TOOLOPS_DB_PREPARED"] = "0"
        # After SIGTERM /readyz says 503 for this long before the socket closes: the
        # balancer (checks every 1 s, down after 2) takes the process out first.
        env["TOOLOPS_SHUTDOWN_DRAIN_S"] = "3"
        # The load measures ToolOps, not each agent's rate limit (agents made from here).
        env["TOOLOPS_AGENT_RATE_LIMIT_PER_MINUTE"] = "0"
        return env

    def start(self) -> None:
        super().start()
        # Listed after the processes that use it: stopped after them.
        self.procs["pgbouncer"] = self.pgbouncer.proc  # type: ignore[assignment]
        backends = [
            (u.split("//")[1].split(":")[0], int(u.rsplit(":", 1)[1])) for u in self.web_urls
        ]
        self.balancer = Balancer(self.workdir, backends, check_path=CHECK_PATH)
        self.balancer.start()
        self.procs["haproxy"] = self.balancer.proc  # type: ignore[assignment]
        self.balancer.wait_up(60)

    @property
    def url(self) -> str:
        assert self.balancer is not None, "the stack is not started"
        return self.balancer.url

    def stop(self) -> None:
        super().stop()  # every Proc, haproxy and pgbouncer among them
        for part in (self.balancer, self.pgbouncer):
            if part is not None:
                with suppress(Exception):
                    part.stop()
