"""The chaos stack: a fresh PostgreSQL database, a Redis server of its own, the demo shop,
two web processes, two Celery workers and a beat — PostgreSQL, Redis and the shop each
behind a fault proxy (tests/faults/proxy.py) — every process restartable by kill -9."""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[2]
DEMO_CATALOG = ROOT / "toolops" / "demo" / "catalog.toml"
DEMO_PREFIX = "http://127.0.0.1:9000"
HOST = "127.0.0.1"
DB_NAME = "toolops_chaos"
REVIEWER = "chaos-reviewer"
# Short leases and sweeps, so that a run of a minute or two sees them act.
TIMINGS = {
    "TOOLOPS_CLAIM_LEASE_S": "5",
    "TOOLOPS_COMPENSATION_SWEEP_S": "3",
    "TOOLOPS_COMPENSATION_GRACE_S": "3",
    "TOOLOPS_APPROVAL_SWEEP_S": "3",
    "TOOLOPS_APPROVAL_GRACE_S": "3",
}
# Named crash points (TOOLOPS_CRASH_AT, name@probability: the process SIGKILLs itself
# there), one per process that passes it; a product without them ignores the variable.
CRASH_POINTS = {
    "web2": "after-answer@0.02",
    "worker1": "after-claim@0.02",
    "worker2": "mid-compensation@0.05",
    "beat": "mid-sweep@0.05",
}
# The beat's stale-claim sweep runs every 30 s whatever the lease (settings.py).
CLAIM_SWEEP_S = 30.0

try:  # the fault proxy of tests/faults (issue 18); without it, no network faults.
    from tests.faults.proxy import FaultProxy
except ImportError:  # pragma: no cover - until that module is merged
    FaultProxy = None  # type: ignore[assignment,misc]


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def port_answers(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex((HOST, port)) == 0


def wait_for(condition: Any, timeout: float, what: str, every: float = 0.2) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: not ready after {timeout:g} s")
        time.sleep(every)


# A process's application clock set off by TOOLOPS_TEST_CLOCK_OFFSET_S (clock-skew faults).
SKEWCLOCK = ROOT / "tests" / "faults" / "skewclock"


@dataclass
class Proc:
    """One child process: its own process group, its output appended to its log."""

    name: str
    args: list[str]
    env: dict[str, str]
    log: Path
    proc: subprocess.Popen[bytes] | None = None
    starts: int = 0
    extra_env: dict[str, str] = field(default_factory=dict)
    closed: bool = False  # stopped for good: never started again
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def start(self) -> None:
        with self.lock:
            if not self.closed:
                self._spawn()

    def _spawn(self) -> None:
        with self.log.open("ab") as log:
            log.write(f"\n--- start {self.starts + 1}: {' '.join(self.args)}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(
                self.args,
                cwd=ROOT,
                env={**self.env, **self.extra_env},
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.starts += 1

    @property
    def exit_text(self) -> str:
        code = None if self.proc is None else self.proc.returncode
        if code is not None and code < 0:
            return f"killed by {signal.Signals(-code).name}"
        return f"exit status {code}"

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL the whole group at once: a crash."""
        if self.proc is None:
            return
        with suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with suppress(subprocess.TimeoutExpired):
            self.proc.wait(10)

    def close(self) -> None:
        """Stop for good (SIGTERM, then SIGKILL): whoever starts it again meanwhile, the
        stop waits for and wins."""
        with self.lock:
            self.closed = True
        self.stop()

    def terminate(self) -> None:
        """Stop for good, without waiting: SIGTERM (close() waits, then kills)."""
        with self.lock:
            self.closed = True
        if self.alive:
            with suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGTERM)  # type: ignore[union-attr]

    def stop(self, grace: float = 8.0) -> None:
        if self.proc is None:
            return
        if self.alive:
            with suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            with suppress(subprocess.TimeoutExpired):
                self.proc.wait(grace)
        self.kill()


class Stack:
    """Everything a chaos run needs, started by `start()` and stopped by `stop()` (also
    when start-up fails half way)."""

    def __init__(
        self,
        workdir: Path,
        seed: int = 0,
        *,
        db_name: str = DB_NAME,
        webs: int = 2,
        workers: int = 2,
        crash_points: bool = False,
        fault_proxies: bool = True,
        extra_env: dict[str, str] | None = None,
    ) -> None:
        self.workdir, self.seed, self.db_name = workdir, seed, db_name
        self.crash_points = crash_points
        # False: PostgreSQL, Redis and the shop reached directly (no network faults).
        self.fault_proxies = fault_proxies
        self.extra_env = extra_env or {}  # on top of every process's environment
        self.stopping = False  # set by stop(): nothing is started again after it
        self.n_webs, self.n_workers = webs, workers
        self.procs: dict[str, Proc] = {}
        self.proxies: dict[str, Any] = {}
        self.shop: Any = None
        self.shop_url = ""
        self.web_urls: list[str] = []
        self.tokens: list[str] = []
        self.reviewer_password = secrets.token_urlsafe(12)
        self.redis_port = free_port()
        self.env: dict[str, str] = {}

    # -- pieces ------------------------------------------------------------------------

    def proxied(self, name: str, port: int) -> int:
        """The port clients use for `name`: its fault proxy's, or the real one."""
        if FaultProxy is None or not self.fault_proxies:
            return port
        proxy = FaultProxy(upstream=(HOST, port), listen_port=0, seed=self.seed + len(self.proxies))
        proxy.start()
        self.proxies[name] = proxy
        return int(proxy.port)

    def start_redis(self) -> None:
        args = [
            "redis-server",
            "--port",
            str(self.redis_port),
            "--bind",
            HOST,
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(self.workdir),
        ]
        proc = Proc("redis", args, dict(os.environ), self.workdir / "redis.log")
        self.procs["redis"] = proc
        proc.start()
        wait_for(lambda: port_answers(self.redis_port), 20, "redis-server")

    def start_shop(self) -> None:
        from toolops.demo.shop import start_shop

        self.shop, url = start_shop(port=0)
        # Stock enough for every reservation of a long run.
        with self.shop.db.transaction() as conn:
            conn.execute("UPDATE stock SET available = 1000000")
        port = int(url.rsplit(":", 1)[1])
        self.shop_url = f"http://{HOST}:{self.proxied('shop', port)}"
        self.shop_direct = url

    def write_catalog(self) -> Path:
        path = self.workdir / "catalog.toml"
        path.write_text(DEMO_CATALOG.read_text().replace(DEMO_PREFIX, self.shop_url))
        return path

    def base_env(self, db_port: int, redis_port: int) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("DJANGO_SETTINGS")}
        env.update(TIMINGS)
        env.update(
            PYTHONPATH=str(ROOT),
            PYTHONUNBUFFERED="1",
            DATABASE_URL=f"postgres://{HOST}:{db_port}/{self.db_name}",
            CELERY_BROKER_URL=f"redis://{HOST}:{redis_port}/0",
            REDIS_URL=f"redis://{HOST}:{redis_port}/1",
            TOOLOPS_TOOLS_FILE=str(self.write_catalog()),
            TOOLOPS_DATA_DIR=str(self.workdir / "var"),
            TOOLOPS_POLICY_CACHE_S="0",
            TOOLOPS_LOG_LEVEL="INFO",
            DJANGO_SECRET_KEY=secrets.token_urlsafe(40),
        )
        env.update(self.extra_env)
        return env

    def add(self, name: str, args: list[str]) -> Proc:
        proc = Proc(name, args, self.env, self.workdir / f"{name}.log")
        if self.crash_points and name in CRASH_POINTS:
            seed = str(self.seed + len(self.procs))
            proc.extra_env = {"TOOLOPS_CRASH_AT": CRASH_POINTS[name], "TOOLOPS_CRASH_SEED": seed}
        self.procs[name] = proc
        proc.start()
        return proc

    def start_processes(self) -> None:
        py = sys.executable
        for i in range(self.n_webs):
            port = free_port()
            self.web_urls.append(f"http://{HOST}:{port}")
            self.add(
                f"web{i + 1}",
                [
                    py,
                    "-m",
                    "uvicorn",
                    "toolops.asgi:application",
                    "--host",
                    HOST,
                    "--port",
                    str(port),
                    "--log-level",
                    "warning",
                    "--no-proxy-headers",
                ],
            )
        for i in range(self.n_workers):
            self.add(
                f"worker{i + 1}",
                [
                    py,
                    "-m",
                    "celery",
                    "-A",
                    "toolops",
                    "worker",
                    "--pool",
                    "threads",
                    "--concurrency",
                    "4",
                    "--loglevel",
                    "info",
                    "-n",
                    f"chaos{i + 1}@%h",
                ],
            )
        self.add(
            "beat",
            [
                py,
                "-m",
                "celery",
                "-A",
                "toolops",
                "beat",
                "--loglevel",
                "info",
                "-s",
                str(self.workdir / "beat-schedule"),
            ],
        )
        for url in self.web_urls:
            wait_for(lambda u=url: web_answers(u), 90, f"web server {url}")

    # -- the whole -----------------------------------------------------------------------

    def start(self) -> None:
        from tests.chaos import setup_db

        (self.workdir / "var").mkdir(parents=True, exist_ok=True)
        self.start_redis()
        self.start_shop()
        db_port = self.database_port()
        redis_port = self.proxied("redis", self.redis_port)
        self.env = self.base_env(db_port, redis_port)
        self.tokens = setup_db.prepare(self.env, self.reviewer_password)
        self.start_processes()

    def database_port(self) -> int:
        """The port of 127.0.0.1 the processes reach PostgreSQL at."""
        return self.proxied("pg", 5432)

    def start_again(self, name: str) -> None:
        if self.stopping:
            return
        proc = self.procs[name]
        proc.kill()
        proc.start()
        if name == "redis":
            wait_for(lambda: port_answers(self.redis_port), 20, "redis-server")

    def skew(self, name: str, offset_s: float | None) -> None:
        """Start `name` again with its application clock `offset_s` seconds off (the
        test-only tests/faults/skewclock), or right."""
        proc = self.procs[name]
        for var in ("PYTHONPATH", "TOOLOPS_TEST_CLOCK_OFFSET_S"):
            proc.extra_env.pop(var, None)
        if offset_s is not None:
            path = os.pathsep.join(filter(None, [str(SKEWCLOCK), self.env.get("PYTHONPATH")]))
            proc.extra_env.update(PYTHONPATH=path, TOOLOPS_TEST_CLOCK_OFFSET_S=f"{offset_s:g}")
        self.start_again(name)

    def revive(self) -> list[str]:
        """Start again every process found dead; their names."""
        dead = [name for name, p in self.procs.items() if not p.alive]
        for name in dead:
            self.start_again(name)
        return dead

    def calm(self) -> None:
        """Processes started with crash points are started again without them, so that
        the stack can go quiet once the faults healed."""
        for proc in self.procs.values():
            if proc.extra_env:
                proc.extra_env = {}
                proc.stop()
                proc.start()

    def logs(self) -> dict[str, str]:
        return {n: p.log.read_text(errors="replace") for n, p in self.procs.items()}

    def stop(self) -> None:
        self.stopping = True
        procs = [p for name, p in self.procs.items() if name != "redis"]
        # All told at once, then each waited for: their shutdowns overlap.
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.close()
        if "redis" in self.procs:
            self.procs["redis"].close()
        for proxy in self.proxies.values():
            with suppress(Exception):
                proxy.stop()
        if self.shop is not None:
            self.shop.shutdown()


def web_answers(url: str) -> bool:
    try:
        return httpx.get(f"{url}/api/v1/schema/?format=json", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False
