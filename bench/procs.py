"""The processes the benchmark starts, and how uvicorn serves an app: every server in
its own process group, stopped by id; free ports; waiting for a server to answer."""

from __future__ import annotations

import contextlib
import http.client
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
PY = sys.executable
HOST = "127.0.0.1"
# Every bench agent's rate limit (requests a minute; Agent.rate_limit_per_minute is a
# PositiveIntegerField, at most 2**31 − 1): counted on every request, as a real agent's
# is, and far above any load the bench makes, so never reached. 0 would mean no limit,
# and a bench without the count would measure a path no deployment takes.
AGENT_RATE_LIMIT = 100_000_000


class BenchError(RuntimeError):
    pass


# -- processes ---------------------------------------------------------------------------


class Processes:
    """Every process the benchmark starts, each in its own process group so that a
    server's children (uvicorn --workers) go with it. Stopped by id, never by name."""

    def __init__(self, logdir: Path) -> None:
        self.logdir = logdir
        self.running: dict[str, tuple[subprocess.Popen[bytes], Path]] = {}

    def start(self, name: str, argv: Sequence[str], env: dict[str, str]) -> None:
        log = self.logdir / f"{name}.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(
                list(argv),
                cwd=ROOT,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        self.running[name] = (proc, log)

    def pid(self, name: str) -> int:
        return self.running[name][0].pid

    def check_alive(self, name: str) -> None:
        proc, log = self.running[name]
        if proc.poll() is not None:
            raise BenchError(f"{name} exited with {proc.returncode}:\n{tail(log)}")

    def stop(self, name: str) -> None:
        proc, _ = self.running.pop(name)
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=5)
        # A group leader gone early may leave children (uvicorn workers) behind.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)

    def stop_all(self) -> None:
        for name in list(self.running):
            self.stop(name)

    def error_logs(self) -> str:
        """From every server log with a traceback: the first traceback (the root cause
        comes first in a chained one) and the log's last line."""
        found = []
        for log in sorted(self.logdir.glob("*.log")):
            lines = log.read_text(errors="replace").splitlines()
            first = next((i for i, line in enumerate(lines) if "Traceback" in line), None)
            if first is None:
                continue
            shown = lines[first : first + 60]
            if first + 60 < len(lines):
                shown += ["  …", lines[-1]]
            found.append(f"--- {log.stem} ---\n" + "\n".join(shown))
        return "\n".join(found)


def tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def free_ports(count: int) -> list[int]:
    socks = []
    for _ in range(count):
        s = socket.socket()
        s.bind((HOST, 0))
        socks.append(s)
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def wait_http(procs: Processes, name: str, port: int, path: str, timeout: float = 60) -> None:
    """Until the server answers anything at all on `path`."""
    deadline = time.monotonic() + timeout
    while True:
        procs.check_alive(name)
        try:
            conn = http.client.HTTPConnection(HOST, port, timeout=5)
            conn.request("GET", path)
            conn.getresponse().read()
            conn.close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise BenchError(
                    f"{name} did not answer on port {port} within {timeout:g} s"
                ) from None
            time.sleep(0.1)


# -- serving -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Serving:
    """How uvicorn serves an ASGI app: `single` process, `workers` (uvicorn --workers N,
    one port), or `procs` (N single-worker processes, N ports, the load spread over them)."""

    mode: str
    n: int = 1
    loop: str = "uvloop"
    wsgi: bool = False  # --study only: Django's WSGI handler on uvicorn's thread pool
    variant: str = ""  # --study only: bench/variant_settings.py (lean, prepared)

    @property
    def label(self) -> str:
        how = self.loop + (", WSGI" if self.wsgi else "")
        how += {"lean": ", lean middleware", "prepared": ", prepared stmts"}.get(self.variant, "")
        if self.mode == "single":
            return f"1 process ({how})"
        if self.mode == "workers":
            return f"--workers {self.n} ({how})"
        return f"{self.n} processes, {self.n} ports ({how})"

    @property
    def interface(self) -> str:
        return "wsgi" if self.wsgi else "auto"


def uvicorn_argv(
    app: str, port: int, *, loop: str, workers: int = 1, interface: str = "auto"
) -> list[str]:
    argv = [
        PY,
        "-m",
        "uvicorn",
        app,
        "--host",
        HOST,
        "--port",
        str(port),
        "--no-access-log",
        "--log-level",
        "warning",
        "--lifespan",
        "off",
        "--loop",
        loop,
        "--http",
        "httptools",
    ]
    if workers > 1:
        argv += ["--workers", str(workers)]
    if interface != "auto":
        argv += ["--interface", interface]
    return argv


class Fleet:
    """One app served one way: its ports, to stop it later."""

    def __init__(
        self, procs: Processes, name: str, app: str, serving: Serving, env: dict[str, str]
    ) -> None:
        self.procs = procs
        self.names: list[str] = []
        self.serving = serving
        if serving.mode == "procs":
            self.ports = free_ports(serving.n)
            for i, port in enumerate(self.ports):
                self.names.append(f"{name}-{i}")
                argv = uvicorn_argv(app, port, loop=serving.loop, interface=serving.interface)
                procs.start(self.names[-1], argv, env)
        else:
            self.ports = free_ports(1)
            workers = serving.n if serving.mode == "workers" else 1
            self.names.append(name)
            argv = uvicorn_argv(
                app, self.ports[0], loop=serving.loop, workers=workers, interface=serving.interface
            )
            procs.start(name, argv, env)

    def wait(self, path: str) -> None:
        for name, port in zip(self.names, self.ports, strict=False):
            wait_http(self.procs, name, port, path)

    def pids(self) -> list[int]:
        return [self.procs.pid(name) for name in self.names]

    def stop(self) -> None:
        for name in self.names:
            self.procs.stop(name)


def toolops_env(tmp: Path, database_url: str, catalog: Path) -> dict[str, str]:
    """The environment of a ToolOps process the bench starts: its database and catalog,
    a fresh secret, quiet logs, no OpenTelemetry, and this checkout on the path."""
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "TOOLOPS_DATA_DIR": str(tmp / "data"),
        "TOOLOPS_TOOLS_FILE": str(catalog),
        "DJANGO_SECRET_KEY": secrets.token_urlsafe(40),
        "DJANGO_DEBUG": "0",
        "TOOLOPS_LOG_LEVEL": "WARNING",
        "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.getenv("PYTHONPATH", "")) if p),
    }
    for name in [k for k in env if k.startswith("OTEL_")] + ["DJANGO_SETTINGS_MODULE"]:
        env.pop(name, None)
    return env


def agent_database(env: dict[str, str]) -> str:
    """The environment's database, dropped, created and migrated, with the agent `bench`
    (its rate limit counted, never reached: AGENT_RATE_LIMIT); its token."""
    from bench.db import fresh_database

    fresh_database(env["DATABASE_URL"])
    run_checked([PY, "manage.py", "migrate", "--noinput", "-v0"], env, "migrate")
    argv = [PY, "manage.py", "create_agent", "bench", "--rate-limit", str(AGENT_RATE_LIMIT)]
    out = run_checked(argv, env, "create_agent")
    return out.strip().splitlines()[-1].strip()


def run_checked(argv: Sequence[str], env: dict[str, str], what: str) -> str:
    done = subprocess.run(list(argv), cwd=ROOT, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise BenchError(f"{what} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return done.stdout


@contextlib.contextmanager
def interrupts_as_exceptions() -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP unwind like Ctrl-C, so that `finally` stops every server
    (SIGINT too: a shell starting the bench in the background would have it ignored)."""

    def raise_interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signals = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    previous = {s: signal.signal(s, raise_interrupt) for s in signals}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def guarded(procs: Processes, what: str, body: Callable[[], object]) -> int:
    """Runs a bench's body and stops every server it started however it ends; the exit
    status: 0, 1 when it fails (what failed and the servers' tracebacks printed), or 130
    when interrupted. Inside `interrupts_as_exceptions`, so that signals unwind here."""
    try:
        body()
    except BenchError as exc:
        procs.stop_all()
        print(f"\n{what} failed: {exc}", file=sys.stderr)
        print(procs.error_logs(), file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("\ninterrupted; stopping the servers", file=sys.stderr)
        return 130
    finally:
        # A second Ctrl-C waits for the servers to stop rather than leave them running.
        for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(s, signal.SIG_IGN)
        procs.stop_all()
    return 0
