"""ToolOps benchmark (`make bench`): the executor's cost against the framework floor.

All in one run, on one machine, so that the figures are ratios:

- direct      the no-op downstream alone (the HTTP tool both ToolOps tools point at);
- floor       a bare DRF endpoint (bench/floor) validating the body and doing the three
              writes a call needs at minimum — claim, result, span — in one transaction;
- read/write  POST /api/v1/runs/{run}/calls through ToolOps, for a `read` and an
              `idempotent_write` tool (a new idempotency key on every write);
- replay      the same write request again and again (`replayed: true`).

p50, p99 and calls/s at concurrency 1 and 8, the targets with PASS/MISS, the SQL statements
of one call (in-process, CaptureQueriesContext), and how uvicorn should serve ToolOps:
a single process, `--workers N`, or N single-worker processes on N ports (measured). Writes
bench/results/latest.json. See bench/README.md.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import platform
import secrets
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
RESULTS = BENCH / "results" / "latest.json"
PY = sys.executable
HOST = "127.0.0.1"
CONCURRENCY = (1, 8)

TOOLOPS_APP = "toolops.asgi:application"
TOOLOPS_WSGI_APP = "bench.toolops_wsgi:application"  # --study only
FLOOR_APP = "bench.floor.asgi:application"
DOWNSTREAM_APP = "bench.downstream:app"

PARAMS_SCHEMA = '{ type = "object", required = ["n"], properties = { n = { type = "integer" } } }'
CATALOG = """\
[[tool]]
name = "bench_write"
kind = "idempotent_write"
description = "No-op write for the benchmark."
url = "{url}/write"
method = "POST"
params_schema = {schema}

[[tool]]
name = "bench_undoable"
kind = "compensable_write"
description = "No-op write whose undo is registered with its result (statement count only)."
url = "{url}/write"
method = "POST"
idempotency_header = true
compensation = {{ tool = "bench_write", args = {{ n = "$.args.n" }} }}
params_schema = {schema}

[[tool]]
name = "bench_read"
kind = "read"
description = "No-op read for the benchmark."
url = "{url}/read"
method = "POST"
params_schema = {schema}
"""


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
                list(argv), cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True,
            )  # fmt: skip
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
        PY, "-m", "uvicorn", app, "--host", HOST, "--port", str(port),
        "--no-access-log", "--log-level", "warning", "--lifespan", "off",
        "--loop", loop, "--http", "httptools",
    ]  # fmt: skip
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


# -- load --------------------------------------------------------------------------------


@dataclass
class Target:
    """One kind of request. `body(thread, seq)` makes the body; `seq` is unique per target
    over the whole benchmark, so writes always carry a new idempotency key."""

    name: str
    ports: list[int]
    path: Callable[[int], str]
    body: Callable[[int, int], bytes]
    headers: dict[str, str]
    expect: tuple[bytes, ...] = ()
    seq: int = 0

    def take(self, count: int) -> int:
        start = self.seq
        self.seq += count
        return start


@dataclass
class Sample:
    latencies_ns: list[int] = field(default_factory=list)
    elapsed_s: float = 0.0
    errors: list[str] = field(default_factory=list)

    def add(self, other: Sample) -> None:
        self.latencies_ns += other.latencies_ns
        self.elapsed_s += other.elapsed_s
        self.errors += other.errors

    def stats(self) -> dict[str, float | int | None]:
        ordered = sorted(self.latencies_ns)
        n = len(ordered)
        if not n:
            return {"n": 0, "p50_ms": 0.0, "p99_ms": 0.0, "mean_ms": 0.0, "calls_per_s": 0.0}
        return {
            "n": n,
            "p50_ms": statistics.median(ordered) / 1e6,
            "p99_ms": ordered[min(n - 1, max(0, -(-99 * n // 100) - 1))] / 1e6,
            "mean_ms": statistics.fmean(ordered) / 1e6,
            "calls_per_s": n / self.elapsed_s if self.elapsed_s else 0.0,
        }


def drive(target: Target, concurrency: int, total: int) -> Sample:
    """`total` requests from `concurrency` threads, each with one keep-alive connection
    (http.client: TCP_NODELAY, request line + headers + body in one send), closed loop."""
    per_thread = max(1, total // concurrency)
    first = target.take(per_thread * concurrency)
    latencies: list[list[int]] = [[] for _ in range(concurrency)]
    errors: list[str] = []
    ready = threading.Barrier(concurrency + 1)

    def worker(t: int) -> None:
        conn = http.client.HTTPConnection(HOST, target.ports[t % len(target.ports)], timeout=60)
        out = latencies[t]
        path, headers, expect = target.path(t), target.headers, target.expect
        seqs = range(first + t * per_thread, first + (t + 1) * per_thread)
        bodies = [target.body(t, s) for s in seqs]
        try:
            conn.connect()
        finally:
            ready.wait()
        clock = time.perf_counter_ns
        try:
            for body in bodies:
                t0 = clock()
                conn.request("POST", path, body, headers)
                response = conn.getresponse()
                data = response.read()
                out.append(clock() - t0)
                if response.status != 200 or not all(e in data for e in expect):
                    errors.append(f"{target.name}: HTTP {response.status} {data[:300]!r}")
                    return
        except (OSError, http.client.HTTPException) as exc:
            errors.append(f"{target.name}: {type(exc).__name__}: {exc}")
        finally:
            conn.close()

    threads = [threading.Thread(target=worker, args=(t,), daemon=True) for t in range(concurrency)]
    for thread in threads:
        thread.start()
    ready.wait()
    started = time.perf_counter()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    sample = Sample([x for part in latencies for x in part], elapsed, errors)
    if errors:
        raise BenchError(f"{len(errors)} failed request(s); first: {errors[0]}")
    return sample


# -- ToolOps setup -----------------------------------------------------------------------


def api(port: int, method: str, path: str, token: str, body: Any = None) -> tuple[int, Any]:
    conn = http.client.HTTPConnection(HOST, port, timeout=30)
    payload = json.dumps(body).encode() if body is not None else None
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    conn.request(method, path, payload, headers)
    response = conn.getresponse()
    data = response.read()
    conn.close()
    return response.status, json.loads(data) if data else None


def create_runs(port: int, token: str, run_ids: Sequence[str]) -> None:
    for run_id in run_ids:
        status, body = api(port, "POST", "/api/v1/runs", token, {"run_id": run_id})
        if status not in (200, 201):
            raise BenchError(f"cannot create run {run_id}: {status} {body}")


def call_body(step: int, tool: str, n: int, tool_call_id: str | None = None) -> bytes:
    body: dict[str, Any] = {"step_index": step, "tool": tool, "args": {"n": n}}
    if tool_call_id is not None:
        body["tool_call_id"] = tool_call_id
    return json.dumps(body).encode()


def toolops_targets(
    ports: list[int], token: str, prefix: str, *, tool_call_ids: bool = False
) -> dict[str, Target]:
    """Without tool_call_ids a replay is found by its idempotency key (same run, step,
    tool and args); with them, by its tool_call_id."""
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {token}"}
    ok = (b'"status":"succeeded"', b'"replayed":false')

    def tcid(kind: str, seq: int) -> str | None:
        return f"tc-{kind}-{seq}" if tool_call_ids else None

    return {
        "write": Target(
            "ToolOps write", ports, lambda t: f"/api/v1/runs/{prefix}-w{t}/calls",
            lambda t, s: call_body(s, "bench_write", s, tcid("w", s)), headers, ok,
        ),
        "read": Target(
            "ToolOps read", ports, lambda t: f"/api/v1/runs/{prefix}-r{t}/calls",
            lambda t, s: call_body(s, "bench_read", s, tcid("r", s)), headers, ok,
        ),
        "replay": Target(
            "ToolOps replay", ports, lambda t: f"/api/v1/runs/{prefix}-replay/calls",
            lambda t, s: call_body(0, "bench_write", 0, tcid("w", 0)), headers,
            (b'"status":"succeeded"', b'"replayed":true'),
        ),
    }  # fmt: skip


def toolops_run_ids(prefix: str) -> list[str]:
    return [f"{prefix}-{kind}{t}" for kind in "wr" for t in range(max(CONCURRENCY))] + [
        f"{prefix}-replay"
    ]


def prime_replay(port: int, token: str, prefix: str, *, tool_call_ids: bool = False) -> None:
    status, body = api(
        port, "POST", f"/api/v1/runs/{prefix}-replay/calls", token,
        json.loads(call_body(0, "bench_write", 0, "tc-w-0" if tool_call_ids else None)),
    )  # fmt: skip
    if status != 200 or body.get("status") != "succeeded" or body.get("replayed"):
        raise BenchError(f"the first write of the replay run did not succeed: {status} {body}")


def direct_target(port: int, kind: str = "write") -> Target:
    # What ToolOps sends the tool: its args as JSON plus its headers.
    headers = {
        "Content-Type": "application/json",
        "Idempotency-Key": "0" * 64,
        "traceparent": f"00-{'0' * 31}1-{'0' * 15}1-01",
        "X-Toolops-Run-Id": "bench",
        "X-Toolops-Tool-Call-Id": "tc-bench",
        "X-Toolops-Attempt": "1",
    }
    return Target(
        "direct", [port], lambda t: f"/{kind}", lambda t, s: json.dumps({"n": s}).encode(),
        headers, (b'"ok"',),
    )  # fmt: skip


def floor_target(ports: list[int]) -> Target:
    return Target(
        "floor", ports, lambda t: f"/floor/runs/bench-floor-{t}/calls",
        lambda t, s: call_body(s, "bench_write", s), {"Content-Type": "application/json"},
        (b'"status":"succeeded"',),
    )  # fmt: skip


def ping_target(ports: list[int]) -> Target:
    return Target(
        "floor ping", ports, lambda t: "/floor/ping", lambda t, s: b"{}",
        {"Content-Type": "application/json"}, (b'"ok"',),
    )  # fmt: skip


def client_costs(port: int, total: int) -> dict[str, dict[str, float | int | None]]:
    """The downstream at conc 1 through the HTTP clients a transport might use (each
    pooled, keep-alive, no retries): what the client itself costs per request. The
    `direct` row is http.client."""
    target = direct_target(port)
    url = f"http://{HOST}:{port}/write"
    senders: dict[str, Callable[[int], int]] = {}
    closers: list[Callable[[], None]] = []
    try:
        import urllib3

        pool = urllib3.PoolManager(retries=False)
        closers.append(pool.clear)

        def via_urllib3(s: int) -> int:
            body = json.dumps({"n": s}).encode()
            response = pool.request("POST", url, body=body, headers=target.headers, timeout=5)
            json.loads(response.data)
            return response.status

        senders["urllib3"] = via_urllib3
    except ImportError:
        pass
    try:
        import httpx

        client = httpx.Client(transport=httpx.HTTPTransport(retries=0), trust_env=False)
        closers.append(client.close)

        def via_httpx(s: int) -> int:
            response = client.post(url, json={"n": s}, headers=target.headers, timeout=5)
            response.json()
            return response.status_code

        senders["httpx"] = via_httpx
    except ImportError:
        pass
    found: dict[str, dict[str, float | int | None]] = {}
    try:
        for name, send in senders.items():
            sample = Sample()
            for s in range(total + 50):
                t0 = time.perf_counter_ns()
                status = send(s)
                elapsed = time.perf_counter_ns() - t0
                if status != 200:
                    raise BenchError(f"downstream via {name}: HTTP {status}")
                if s >= 50:
                    sample.latencies_ns.append(elapsed)
                    sample.elapsed_s += elapsed / 1e9
            found[name] = sample.stats()
    finally:
        for close in closers:
            close()
    return found


# -- database ----------------------------------------------------------------------------


def database_name(url: str) -> str:
    from psycopg.conninfo import conninfo_to_dict

    name = conninfo_to_dict(url).get("dbname")
    if not name:
        raise BenchError(f"the bench database URL names no database: {url}")
    return str(name)


def fresh_database(url: str) -> None:
    import psycopg
    from psycopg.conninfo import make_conninfo

    name = database_name(url)
    admin = make_conninfo(url, dbname="postgres")
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def run_checked(argv: Sequence[str], env: dict[str, str], what: str) -> str:
    done = subprocess.run(list(argv), cwd=ROOT, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise BenchError(f"{what} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return done.stdout


# -- the machine -------------------------------------------------------------------------


def cpu_busy(seconds: float = 1.0) -> float | None:
    """The share of all CPUs busy over `seconds` (Linux /proc/stat), or None."""

    def sample() -> tuple[int, int]:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
        return sum(fields), idle

    try:
        total0, idle0 = sample()
        time.sleep(seconds)
        total1, idle1 = sample()
    except (OSError, ValueError, IndexError):
        return None
    total = total1 - total0
    return None if total <= 0 else 1 - (idle1 - idle0) / total


CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _proc_stat(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()  # fields from the 3rd (state) on
    except (OSError, IndexError):
        return None


def group_cpu_s(leaders: Sequence[int]) -> float | None:
    """CPU seconds (user + system) used so far by the process groups of `leaders` (a
    uvicorn server and its --workers children), from /proc; None where there is none."""
    groups = set(leaders)
    total = 0.0
    try:
        entries = [int(e) for e in os.listdir("/proc") if e.isdigit()]
    except OSError:
        return None
    for pid in entries:
        fields = _proc_stat(pid)
        if fields is not None and int(fields[2]) in groups:
            total += (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
    return total


def backends_cpu_s(dbname: str) -> dict[int, float]:
    """CPU seconds used so far by each PostgreSQL backend serving `dbname`."""
    found: dict[int, float] = {}
    try:
        entries = [int(e) for e in os.listdir("/proc") if e.isdigit()]
    except OSError:
        return found
    marker = f" {dbname} ".encode()
    for pid in entries:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                title = f.read()
        except OSError:
            continue
        if title.startswith(b"postgres:") and marker in title:
            fields = _proc_stat(pid)
            if fields is not None:
                found[pid] = (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
    return found


class CpuMeter:
    """CPU spent by the servers of one case and by the database's backends, per call."""

    def __init__(self, leaders: Sequence[int], dbname: str) -> None:
        self.leaders = list(leaders)
        self.dbname = dbname
        self.server_s = 0.0
        self.db_s = 0.0
        self.calls = 0

    @contextlib.contextmanager
    def measuring(self, calls: int) -> Iterator[None]:
        server0 = group_cpu_s(self.leaders)
        db0 = backends_cpu_s(self.dbname)
        yield
        server1 = group_cpu_s(self.leaders)
        db1 = backends_cpu_s(self.dbname)
        if server0 is not None and server1 is not None:
            self.server_s += server1 - server0
        self.db_s += sum(db1[pid] - db0[pid] for pid in db1.keys() & db0.keys())
        self.calls += calls

    def per_call_ms(self) -> dict[str, float | None]:
        if not self.calls or not os.path.isdir("/proc"):
            return {"server_cpu_ms": None, "db_cpu_ms": None}
        return {
            "server_cpu_ms": self.server_s * 1000 / self.calls,
            "db_cpu_ms": self.db_s * 1000 / self.calls,
        }


def calibrate_database(url: str) -> dict[str, dict[str, float]]:
    """What one round trip and one commit cost on this machine, straight through psycopg."""
    import psycopg

    def timed(fn: Callable[[], object], count: int) -> dict[str, float]:
        sample = Sample()
        for _ in range(count):
            t0 = time.perf_counter_ns()
            fn()
            sample.latencies_ns.append(time.perf_counter_ns() - t0)
        sample.elapsed_s = sum(sample.latencies_ns) / 1e9
        stats = sample.stats()
        return {"p50_ms": stats["p50_ms"], "p99_ms": stats["p99_ms"]}

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE bench_calibration (id bigserial PRIMARY KEY, v text)")

        def commit() -> None:
            with conn.transaction():
                conn.execute("INSERT INTO bench_calibration (v) VALUES ('x')")

        try:
            for _ in range(50):
                conn.execute("SELECT 1").fetchone()
            return {
                "select_1": timed(lambda: conn.execute("SELECT 1").fetchone(), 1000),
                "begin_insert_commit": timed(commit, 400),
            }
        finally:
            conn.execute("DROP TABLE bench_calibration")


# -- the benchmark -----------------------------------------------------------------------

LABELS = {
    "direct": "direct downstream",
    "floor": "floor (DRF + 3 writes)",
    "read": "ToolOps read",
    "write": "ToolOps write",
    "replay": "ToolOps replay",
    "ping": "floor ping (no DB) *",
}


class Bench:
    def __init__(self, options: argparse.Namespace, tmp: Path, procs: Processes) -> None:
        self.o = options
        self.tmp = tmp
        self.procs = procs
        self.out: TextIO = sys.stdout
        self.results: dict[str, Any] = {}
        self.token = ""
        self.seconds = options.seconds if options.seconds else (2.0 if options.quick else 6.0)
        self.started = time.monotonic()
        self.env = {
            **os.environ,
            "DATABASE_URL": options.database_url,
            "TOOLOPS_DATA_DIR": str(tmp / "data"),
            "TOOLOPS_TOOLS_FILE": str(tmp / "catalog.toml"),
            "DJANGO_SECRET_KEY": secrets.token_urlsafe(40),
            "DJANGO_DEBUG": "0",
            "TOOLOPS_LOG_LEVEL": "WARNING",
            "PYTHONPATH": os.pathsep.join(
                p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p
            ),
        }
        # Each app names its own settings (toolops.settings, bench.floor.settings).
        self.env.pop("DJANGO_SETTINGS_MODULE", None)

    def say(self, text: str = "") -> None:
        print(text, file=self.out, flush=True)

    def step(self, text: str) -> None:
        self.say(f"[{time.monotonic() - self.started:4.0f} s] {text}")

    def sized(self, target: Target, conc: int, seconds: float, lo: int = 40) -> int:
        """Warm up, and size the measurement to about `seconds` at the warm-up's rate."""
        rate = drive(target, conc, conc * (15 if conc > 1 else 30)).stats()["calls_per_s"]
        hi = 6000 if conc == 1 else 12000
        return int(min(hi, max(lo, rate * seconds)))

    # -- steps

    def setup_database(self) -> None:
        self.step(f"database: fresh {self.o.database_url}, migrate, agent …")
        fresh_database(self.o.database_url)
        run_checked([PY, "manage.py", "migrate", "--noinput", "-v0"], self.env, "migrate")
        run_checked(
            [PY, "-m", "django", "migrate", "floor", "--noinput", "-v0",
             "--settings", "bench.floor.settings"],
            self.env, "migrate (floor)",
        )  # fmt: skip
        out = run_checked([PY, "manage.py", "create_agent", "bench"], self.env, "create_agent")
        self.token = out.strip().splitlines()[-1].strip()

    def machine(self) -> None:
        busy = cpu_busy()
        if self.o.wait_quiet and busy is not None and busy > 0.15:
            self.step(f"waiting up to {self.o.wait_quiet:g} s for the CPUs to be quiet …")
            deadline = time.monotonic() + self.o.wait_quiet
            quiet = 0
            while time.monotonic() < deadline and quiet < 3:
                busy = cpu_busy(2.0)
                quiet = quiet + 1 if busy is not None and busy < 0.15 else 0
        calibration = calibrate_database(self.o.database_url)
        self.results["machine_before"] = {"cpu_busy_idle_bench": busy, **calibration}
        self.say(
            "machine: "
            + (f"CPUs {busy:.0%} busy while the bench is idle; " if busy is not None else "")
            + f"PostgreSQL SELECT 1 p50 {calibration['select_1']['p50_ms']:.3f} ms, "
            f"BEGIN+INSERT+COMMIT p50 {calibration['begin_insert_commit']['p50_ms']:.3f} ms"
            f" (p99 {calibration['begin_insert_commit']['p99_ms']:.2f})"
        )
        if busy is not None and busy > 0.25:
            self.say("  WARNING: other work is using the CPUs; every figure is inflated and noisy")

    def start_downstream(self, kind: str, name: str, port: int | None = None) -> int:
        port = port or free_ports(1)[0]
        if kind == "stdlib":
            argv = [PY, str(BENCH / "downstream.py"), "--host", HOST, "--port", str(port)]
        else:
            argv = uvicorn_argv(DOWNSTREAM_APP, port, loop="uvloop")
        self.procs.start(name, argv, self.env)
        wait_http(self.procs, name, port, "/")
        return port

    def probe_downstreams(self) -> str:
        """stdlib ThreadingHTTPServer vs uvicorn + raw ASGI: the faster becomes `direct`."""
        self.step("downstream: stdlib ThreadingHTTPServer vs uvicorn raw ASGI …")
        found: dict[str, dict[str, Any]] = {}
        for kind in ("stdlib", "asgi"):
            port = self.start_downstream(kind, f"probe-downstream-{kind}")
            target = direct_target(port)
            drive(target, 8, 400)
            found[kind] = {
                f"c{c}": drive(target, c, self.sized(target, c, 1.0, lo=500)).stats()
                for c in CONCURRENCY
            }
            self.procs.stop(f"probe-downstream-{kind}")
        pick = self.o.downstream
        if pick == "auto":
            pick = min(found, key=lambda k: found[k]["c1"]["p50_ms"] + found[k]["c8"]["p50_ms"])
        for kind, stats in found.items():
            self.say(
                f"  {kind:7} p50 c1 {stats['c1']['p50_ms']:.3f} ms, c8 {stats['c8']['p50_ms']:.3f}"
                f" ms, {stats['c8']['calls_per_s']:.0f} calls/s at c8"
                + ("   ← used" if kind == pick else "")
            )
        self.results["downstream_probe"] = {"used": pick, **found}
        return pick

    def write_catalog(self, downstream_port: int) -> None:
        text = CATALOG.format(url=f"http://{HOST}:{downstream_port}", schema=PARAMS_SCHEMA)
        (self.tmp / "catalog.toml").write_text(text)

    def start_toolops(self, serving: Serving, prefix: str) -> tuple[Fleet, dict[str, Target]]:
        app = TOOLOPS_WSGI_APP if serving.wsgi else TOOLOPS_APP
        env = self.env
        if serving.variant:
            env = {
                **env,
                "DJANGO_SETTINGS_MODULE": "bench.variant_settings",
                "BENCH_VARIANT": serving.variant,
            }
        fleet = Fleet(self.procs, f"toolops-{prefix}", app, serving, env)
        fleet.wait("/api/v1/schema/?format=json")
        create_runs(fleet.ports[0], self.token, toolops_run_ids(prefix))
        tcids = self.o.tool_call_id
        prime_replay(fleet.ports[0], self.token, prefix, tool_call_ids=tcids)
        return fleet, toolops_targets(fleet.ports, self.token, prefix, tool_call_ids=tcids)

    def probe_serving(self) -> None:
        """uvicorn --workers N vs one process vs N processes: keep-alive ToolOps write
        calls, p50 at conc 1 (a delayed-ACK stall shows as ~40 ms) and at conc 8."""
        n = self.o.procs
        modes = [
            Serving("single", 1, "uvloop"),
            Serving("workers", n, "uvloop"),
            Serving("workers", n, "asyncio"),
            Serving("procs", n, "uvloop"),
        ]
        if self.o.study:
            cpus = os.cpu_count() or 2
            others = sorted({cpus, cpus + 1, 2 * cpus} - {n})
            modes += [Serving("single", 1, "asyncio"), Serving("procs", n, "asyncio")]
            modes += [Serving("workers", k, "uvloop") for k in others]
            modes += [Serving("procs", k, "uvloop") for k in others]
            modes += [Serving("procs", n, "uvloop", variant="lean")]
            modes += [Serving("procs", n, "uvloop", variant="prepared")]
            modes += [Serving("single", 1, "uvloop", wsgi=True)]
            modes += [Serving("procs", n, "uvloop", wsgi=True)]
        self.step("serving: how uvicorn should serve ToolOps (write calls, keep-alive) …")
        rows = []
        seconds = max(1.0, self.seconds * 0.4)
        for i, serving in enumerate(modes):
            fleet, targets = self.start_toolops(serving, f"probe{i}")
            try:
                write = targets["write"]
                drive(write, 8, 20 * 8)  # warm-up (every worker, hopefully)
                meter = CpuMeter(fleet.pids(), database_name(self.o.database_url))
                count = self.sized(write, 1, seconds, lo=30)
                with meter.measuring(count):
                    c1 = drive(write, 1, count).stats()
                c1.update(meter.per_call_ms())
                meter = CpuMeter(fleet.pids(), database_name(self.o.database_url))
                count = self.sized(write, 8, seconds, lo=80)
                with meter.measuring(count):
                    c8 = drive(write, 8, count).stats()
                c8.update(meter.per_call_ms())
            finally:
                fleet.stop()
            stall = c1["p50_ms"] > 30
            rows.append({"serving": serving.label, "mode": serving.mode, "n": serving.n,
                         "loop": serving.loop, "c1": c1, "c8": c8, "stall": stall})  # fmt: skip
            self.say(
                f"  {serving.label:34} c1 p50 {c1['p50_ms']:6.2f} ms | c8 p50 {c8['p50_ms']:6.2f}"
                f" p99 {c8['p99_ms']:6.1f} ms {c8['calls_per_s']:4.0f}/s"
                f" | CPU/call srv {_ms(c8['server_cpu_ms'])} db {_ms(c8['db_cpu_ms'])} ms"
                + ("   ← delayed-ACK stall" if stall else "")
            )
        self.results["serving_probe"] = rows
        stalled = [r["serving"] for r in rows if r["stall"]]
        self.say(
            "  → stall (TCP_NODELAY off): " + (", ".join(stalled) if stalled else "none")
            + ". asyncio sets TCP_NODELAY only on sockets whose proto is IPPROTO_TCP; "
            "uvicorn --workers binds with proto 0. uvloop sets it on every TCP socket."
        )  # fmt: skip

    def measure(self, serving: Serving, downstream_port: int) -> None:
        self.step(f"measuring: ToolOps and floor served as {serving.label} …")
        floor = Fleet(self.procs, "floor", FLOOR_APP, serving, self.env)
        toolops, targets = self.start_toolops(serving, "main")
        floor.wait("/")
        cases: dict[str, Target] = {
            "direct": direct_target(downstream_port),
            "floor": floor_target(floor.ports),
            "read": targets["read"],
            "write": targets["write"],
            "replay": targets["replay"],
            "ping": ping_target(floor.ports),
        }
        rounds = max(1, self.o.rounds)
        sizes: dict[tuple[str, int], int] = {}
        for name, target in cases.items():  # warm-up: every process, pool and code path
            drive(target, 8, 20 * 8)
            for c in CONCURRENCY:
                sizes[(name, c)] = self.sized(target, c, self.seconds, lo=100 * rounds)
        totals = {key: Sample() for key in sizes}
        dbname = database_name(self.o.database_url)
        servers = {
            "direct": [self.procs.pid("downstream")], "floor": floor.pids(), "ping": floor.pids(),
            "read": toolops.pids(), "write": toolops.pids(), "replay": toolops.pids(),
        }  # fmt: skip
        meters = {key: CpuMeter(servers[key[0]], dbname) for key in sizes}
        for r in range(rounds):  # interleaved, so a burst of outside load hits every case
            for c in CONCURRENCY:
                for name, target in cases.items():
                    count = sizes[(name, c)] // rounds
                    with meters[(name, c)].measuring(count):
                        totals[(name, c)].add(drive(target, c, count))
            self.say(f"  round {r + 1}/{rounds} done")
        toolops.stop()
        floor.stop()
        self.results["serving"] = {"mode": serving.mode, "n": serving.n, "loop": serving.loop,
                                   "label": serving.label}  # fmt: skip
        self.results["rows"] = [
            {
                "case": name,
                "label": LABELS[name],
                "conc": c,
                **totals[(name, c)].stats(),
                **meters[(name, c)].per_call_ms(),
            }  # fmt: skip
            for c in CONCURRENCY
            for name in cases
        ]
        self.results["clients_c1"] = client_costs(downstream_port, 1000)
        busy = cpu_busy()
        self.results["machine_after"] = {"cpu_busy_idle_bench": busy}

    def count_statements(self) -> None:
        self.step("statements: one write, one read, one replay, in-process …")
        env = {**self.env, "BENCH_TOKEN": self.token}
        try:
            toolops = json.loads(
                run_checked([PY, str(BENCH / "sqlcount.py"), "toolops"], env, "sqlcount toolops")
            )
            floor = json.loads(
                run_checked([PY, str(BENCH / "sqlcount.py"), "floor"], env, "sqlcount floor")
            )
            expected = {
                "write": False, "read": False, "replay": True,
                "write_with_tool_call_id": False, "replay_by_tool_call_id": True,
                "write_with_undo": False,
            }  # fmt: skip
            for name, expect_replayed in expected.items():
                got = toolops[name]
                if got["status"] != 200 or got["replayed"] is not expect_replayed:
                    raise BenchError(f"the {name} call answered {got}")
        except BenchError as exc:  # the load still tells something: go on, say it at the end
            self.results["statements"] = {"error": str(exc)}
            self.say(f"  statement count failed: {str(exc)[-2000:]}")
            return
        self.results["statements"] = {**toolops, **floor}

    # -- report

    def row(self, case: str, conc: int) -> dict[str, Any]:
        return next(r for r in self.results["rows"] if r["case"] == case and r["conc"] == conc)

    def targets(self) -> list[dict[str, Any]]:
        found = []
        for c in CONCURRENCY:
            direct, floor = self.row("direct", c), self.row("floor", c)
            for case in ("write", "read"):
                call = self.row(case, c)
                overhead = call["p50_ms"] - direct["p50_ms"]
                limit = 1.5 * floor["p50_ms"]
                found.append({
                    "target": "executor overhead", "case": case, "conc": c,
                    "value_ms": overhead, "limit_ms": limit, "pass": overhead <= limit,
                    "text": f"{case}: p50 {call['p50_ms']:.2f} − direct {direct['p50_ms']:.2f}"
                            f" = {overhead:.2f} ms vs 1.5 × floor {floor['p50_ms']:.2f}"
                            f" = {limit:.2f} ms ({overhead / floor['p50_ms']:.2f}× floor)",
                })  # fmt: skip
            for case in ("write", "read", "replay"):
                call = self.row(case, c)
                limit = 4 * call["p50_ms"]
                found.append({
                    "target": "p99 ≤ 4 × p50", "case": case, "conc": c,
                    "value_ms": call["p99_ms"], "limit_ms": limit,
                    "pass": call["p99_ms"] <= limit,
                    "text": f"{case}: p99 {call['p99_ms']:.2f} ms vs 4 × p50 {call['p50_ms']:.2f}"
                            f" = {limit:.2f} ms ({call['p99_ms'] / call['p50_ms']:.1f}×)",
                })  # fmt: skip
            replay = self.row("replay", c)
            found.append({
                "target": "replay p50 ≤ floor p50", "case": "replay", "conc": c,
                "value_ms": replay["p50_ms"], "limit_ms": floor["p50_ms"],
                "pass": replay["p50_ms"] <= floor["p50_ms"],
                "text": f"replay: p50 {replay['p50_ms']:.2f} ms vs floor p50"
                        f" {floor['p50_ms']:.2f} ms ({replay['p50_ms'] / floor['p50_ms']:.2f}×)",
            })  # fmt: skip
        return found

    def report(self) -> None:
        self.say()
        sent = "{step_index, tool, args" + (", tool_call_id}" if self.o.tool_call_id else "}")
        self.say(f"ToolOps and floor served as {self.results['serving']['label']}; "
                 f"downstream: {self.results['downstream_probe']['used']}")  # fmt: skip
        self.say(f"calls send {sent}")
        self.say(
            f"{'case':26} {'conc':>4} {'n':>6} {'p50 ms':>8} {'p99 ms':>8} {'calls/s':>8}"
            f" {'srv CPU':>8} {'db CPU':>7}"
        )
        self.say("-" * 82)
        for c in CONCURRENCY:
            for case, label in LABELS.items():
                r = self.row(case, c)
                srv, db = _ms(r["server_cpu_ms"]), _ms(r["db_cpu_ms"])
                self.say(
                    f"{label:26} {c:>4} {r['n']:>6} {r['p50_ms']:>8.2f} {r['p99_ms']:>8.2f}"
                    f" {r['calls_per_s']:>8.0f} {srv:>8} {db:>7}"
                )
        self.say("* for reading the floor: Django + DRF alone, no database, same server")
        self.say("  srv CPU / db CPU: CPU ms per call used by the serving processes / by the")
        self.say("  PostgreSQL backends (for ToolOps rows srv excludes the downstream's own CPU)")
        clients = self.results["clients_c1"]
        if clients:
            self.say(
                "  the downstream through other HTTP clients, conc 1 (direct is http.client): "
                + ", ".join(f"{k} p50 {v['p50_ms']:.2f} ms" for k, v in clients.items())
            )
        after = self.results.get("machine_after", {}).get("cpu_busy_idle_bench")
        if after is not None:
            self.say(f"  CPUs busy while the bench is idle, after the measurement: {after:.0%}")
        self.say()
        self.say("Targets (checked here, not by the tests)")
        targets = self.targets()
        self.results["targets"] = targets
        for t in targets:
            verdict = "PASS" if t["pass"] else "MISS"
            self.say(f"  {verdict}  conc {t['conc']}  {t['target']:24} {t['text']}")
        self.say()
        statements = self.results["statements"]
        if "error" in statements:
            self.say(f"SQL statements per call: the count failed:\n{statements['error'][-2000:]}")
            return
        self.say("SQL statements per call (in-process, CaptureQueriesContext). BEGIN and COMMIT")
        self.say("are round trips too and are listed; a statement outside them commits alone.")
        names = {
            "write": "write", "read": "read", "replay": "replay", "floor": "floor",
            "write_with_tool_call_id": "write with tool_call_id",
            "replay_by_tool_call_id": "replay by tool_call_id",
            "write_with_undo": "write registering an undo",
            "first_call_of_process": "first write of a process",
        }  # fmt: skip
        for name, label in names.items():
            got = statements.get(name)
            if got is None:
                continue
            txn = sum(1 for s in got["statements"] if s in ("BEGIN", "COMMIT", "ROLLBACK"))
            self.say(f"  {label:25} {len(got['statements']):>3} round trips ({txn} BEGIN/COMMIT)")
            if self.o.verbose:
                for i, sql in enumerate(got["statements"], 1):
                    self.say(f"      {i:>2}. {shorten(sql)}")
        if not self.o.verbose:
            self.say("  (--verbose lists the statements)")

    def save(self) -> None:
        self.results["run"] = {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
            "git": git_rev(),
            "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "seconds_per_case": self.seconds,
            "tool_call_id": self.o.tool_call_id,
            "procs": self.o.procs,
            "rounds": self.o.rounds,
        }
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps(self.results, indent=2) + "\n")
        self.say(f"\nwritten: {RESULTS.relative_to(ROOT)}")


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def shorten(sql: str, limit: int = 4000) -> str:
    sql = " ".join(sql.split())
    return sql if len(sql) <= limit else sql[: limit - 1] + "…"


def git_rev() -> str:
    try:
        done = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        )
        return done.stdout.strip()
    except OSError:
        return ""


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


def parse_serving(text: str, n: int, loop: str) -> Serving:
    if text not in ("single", "workers", "procs"):
        raise argparse.ArgumentTypeError("--serve is single, workers or procs")
    return Serving(text, 1 if text == "single" else n, loop)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="ToolOps benchmark: executor overhead vs the framework floor.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--verbose", "-v", action="store_true", help="list the SQL statements")
    parser.add_argument("--quick", action="store_true", help="about 2 s per case instead of 6")
    parser.add_argument(
        "--seconds", type=float, default=0, help="measuring time per case and concurrency"
    )
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    parser.add_argument(
        "--serve", default="procs", choices=["single", "workers", "procs"],
        help="how uvicorn serves ToolOps and the floor (default: procs, one port each)",
    )  # fmt: skip
    parser.add_argument(
        "--procs", type=int, default=os.cpu_count() or 2,
        help="N for --workers N or N processes (default: the number of CPUs)",
    )  # fmt: skip
    parser.add_argument("--loop", default="uvloop", choices=["uvloop", "asyncio"])
    parser.add_argument(
        "--downstream", default="auto", choices=["auto", "stdlib", "asgi"],
        help="the no-op downstream (default: the faster one, measured)",
    )  # fmt: skip
    parser.add_argument("--no-probe", action="store_true", help="skip the serving comparison")
    parser.add_argument(
        "--wait-quiet", type=float, default=0, metavar="SECONDS",
        help="on a shared machine: first wait up to SECONDS for the CPUs to be idle",
    )  # fmt: skip
    parser.add_argument(
        "--tool-call-id", action="store_true",
        help="send a tool_call_id with every call (the replay is then found by it)",
    )  # fmt: skip
    parser.add_argument(
        "--study",
        action="store_true",
        help="more serving modes, and what-ifs (lean middleware, prepared statements, WSGI)",
    )
    parser.add_argument(
        "--database-url",
        default=os.getenv("BENCH_DATABASE_URL", "postgres:///toolops_bench"),
        help="dropped and created afresh (default: $BENCH_DATABASE_URL or "
        "postgres:///toolops_bench)",
    )
    options = parser.parse_args(argv)
    if not options.database_url.startswith(("postgres://", "postgresql://")):
        parser.error("the benchmark runs on PostgreSQL: --database-url postgres://…")
    serving = parse_serving(options.serve, options.procs, options.loop)

    started = time.monotonic()
    with (
        tempfile.TemporaryDirectory(prefix="toolops-bench-") as tmpdir,
        interrupts_as_exceptions(),
    ):
        tmp = Path(tmpdir)
        procs = Processes(tmp)
        bench = Bench(options, tmp, procs)
        try:
            (port,) = free_ports(1)
            bench.write_catalog(port)  # before migrate: `check` validates the catalog
            bench.setup_database()
            bench.machine()
            kind = bench.probe_downstreams()
            bench.start_downstream(kind, "downstream", port)
            bench.count_statements()  # first: the code is the one just migrated
            if not options.no_probe:
                bench.probe_serving()
            bench.measure(serving, port)
            bench.report()
            bench.save()
        except BenchError as exc:
            procs.stop_all()
            print(f"\nbench failed: {exc}", file=sys.stderr)
            print(procs.error_logs(), file=sys.stderr)
            return 1
        except KeyboardInterrupt:
            print("\ninterrupted; stopping the servers", file=sys.stderr)
            return 130
        finally:
            for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):  # a 2nd Ctrl-C waits
                signal.signal(s, signal.SIG_IGN)
            procs.stop_all()
    print(f"({time.monotonic() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
