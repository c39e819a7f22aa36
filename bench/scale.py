"""ToolOps benchmark, scale (`make bench` runs it after the others; runs alone too): the
write path served by 1, 2 and 3 web processes at the same concurrency per process.

- ToolOps served as bench/run.py serves it (uvicorn, one single-worker process per port,
  uvloop, httptools, no access log), on PostgreSQL, with the same no-op downstream
  (bench/downstream.py) and catalog; three processes started once, a row using the first
  1, 2 or 3 of them;
- the load: `--per-process` client threads per web process (default 8: 8, 16, 24), each
  thread one keep-alive connection to one process, the threads dealt round-robin over
  the processes' ports: client-side round robin, no balancer and no extra hop;
- the write (a new call per request, bench/run.py's `write` case: an idempotent write in
  a run without a budget, one run per client thread), in interleaved rounds so that drift
  and other people's work hit every row alike;
- per row: calls/s, p50, p99, the web processes' CPU per call (utime + stime from /proc,
  before and after), the database backends' CPU per call, where the whole machine's CPU
  went (web, PostgreSQL, the load generator, the downstream, the rest) and what the
  database's backends were waiting on (pg_stat_activity sampled);
- then each process's resident memory (VmRSS) once 10,000 calls (`--rss-calls`) have gone
  through it, beside its VmRSS after the warm-up. No worker is involved: the write path
  runs whole in the web process.

The load generator runs on the same machine as everything else and takes its share of
the CPUs: the output says how much. Writes bench/results/scale.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import secrets
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# First, before this folder: bench/traces.py must not shadow the traces package.
sys.path.insert(0, str(ROOT))

from bench.cases import CATALOG, PARAMS_SCHEMA, TOOLOPS_APP, create_runs, toolops_targets  # noqa: E402
from bench.cpu import CpuMeter, cpu_busy  # noqa: E402
from bench.db import database_name, fresh_database  # noqa: E402
from bench.load import Sample, Target, drive  # noqa: E402
from bench.procs import (  # noqa: E402
    AGENT_RATE_LIMIT,
    BENCH,
    HOST,
    PY,
    Processes,
    free_ports,
    guarded,
    interrupts_as_exceptions,
    run_checked,
    uvicorn_argv,
    wait_http,
)
from bench.report import git_rev  # noqa: E402
from bench.scale_probe import CpuSplit, WaitSampler, pool_backends, vm_rss_kb  # noqa: E402
from bench.scale_report import print_scale  # noqa: E402

RESULTS = BENCH / "results" / "scale.json"


def parse_options(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="ToolOps benchmark: 1, 2 and 3 web processes.")
    parser.add_argument("--quick", action="store_true", help="about 3 s per row and round")
    parser.add_argument("--seconds", type=float, default=0, help="measuring time per row and round")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    parser.add_argument("--procs", type=int, default=3, help="up to this many web processes")
    parser.add_argument(
        "--per-process",
        type=int,
        default=8,
        help="client threads per web process (default 8: 8, 16, 24 for 1, 2, 3 processes)",
    )
    parser.add_argument(
        "--rss-calls",
        type=int,
        default=10_000,
        help="calls through each process before its VmRSS is read (default 10,000)",
    )
    parser.add_argument(
        "--database-url",
        default=os.getenv("BENCH_SCALE_DATABASE_URL", "postgres:///toolops_bench_scale"),
        help="dropped and created afresh (default: $BENCH_SCALE_DATABASE_URL or "
        "postgres:///toolops_bench_scale)",
    )
    o = parser.parse_args(argv)
    if not o.database_url.startswith(("postgres://", "postgresql://")):
        parser.error("the benchmark runs on PostgreSQL: --database-url postgres://…")
    for name in ("procs", "per_process", "rounds"):
        if getattr(o, name) < 1:
            parser.error(f"--{name.replace('_', '-')}: at least 1")
    if o.rss_calls < 0:
        parser.error("--rss-calls: 0 or more")
    return o


class Scale:
    def __init__(self, o: argparse.Namespace, tmp: Path, procs: Processes) -> None:
        self.o, self.tmp, self.procs = o, tmp, procs
        self.started = time.monotonic()
        self.seconds = o.seconds or (3.0 if o.quick else 8.0)
        self.dbname = database_name(o.database_url)
        self.env = {
            **os.environ,
            "DATABASE_URL": o.database_url,
            "TOOLOPS_DATA_DIR": str(tmp / "data"),
            "TOOLOPS_TOOLS_FILE": str(tmp / "catalog.toml"),
            "DJANGO_SECRET_KEY": secrets.token_urlsafe(40),
            "DJANGO_DEBUG": "0",
            "TOOLOPS_LOG_LEVEL": "WARNING",
            "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.getenv("PYTHONPATH", "")) if p),
        }
        for name in [k for k in self.env if k.startswith("OTEL_")]:
            self.env.pop(name)
        self.env.pop("DJANGO_SETTINGS_MODULE", None)
        self.names = [f"toolops-{i}" for i in range(o.procs)]
        self.ports: list[int] = []
        self.through = [0] * o.procs  # calls each process has served
        self.results: dict[str, Any] = {"cpus": os.cpu_count(), "per_process": o.per_process}

    def say(self, text: str = "") -> None:
        print(text, flush=True)

    def step(self, text: str) -> None:
        self.say(f"[{time.monotonic() - self.started:4.0f} s] {text}")

    def pids(self, n: int) -> list[int]:
        return [self.procs.pid(name) for name in self.names[:n]]

    def setup(self) -> Target:
        self.step(f"database: fresh {self.o.database_url}, migrate, agent …")
        downstream, *self.ports = free_ports(1 + self.o.procs)
        (self.tmp / "catalog.toml").write_text(
            CATALOG.format(url=f"http://{HOST}:{downstream}", schema=PARAMS_SCHEMA)
        )
        fresh_database(self.o.database_url)
        run_checked([PY, "manage.py", "migrate", "--noinput", "-v0"], self.env, "migrate")
        out = run_checked(
            [PY, "manage.py", "create_agent", "bench-scale", "--rate-limit", str(AGENT_RATE_LIMIT)],
            self.env,
            "create_agent",
        )
        token = out.strip().splitlines()[-1].strip()
        self.procs.start(
            "downstream",
            [PY, str(BENCH / "downstream.py"), "--host", HOST, "--port", str(downstream)],
            self.env,
        )
        wait_http(self.procs, "downstream", downstream, "/")
        self.step(f"{self.o.procs} ToolOps web processes, one port each …")
        for name, port in zip(self.names, self.ports, strict=True):
            self.procs.start(name, uvicorn_argv(TOOLOPS_APP, port, loop="uvloop"), self.env)
        for name, port in zip(self.names, self.ports, strict=True):
            wait_http(self.procs, name, port, "/api/v1/schema/?format=json")
        prefix = f"scale-{format(int(time.time()), 'x')}"
        threads = self.o.per_process * self.o.procs
        create_runs(self.ports[0], token, [f"{prefix}-w{t}" for t in range(threads)])
        return toolops_targets(self.ports, token, prefix)["write"]

    def drive_on(self, target: Target, n: int, total: int) -> Sample:
        """`total` writes from per_process × n threads over the first n processes."""
        conc = self.o.per_process * n
        target.ports = self.ports[:n]
        sample = drive(target, conc, total)
        per_thread = max(1, total // conc)
        for i in range(n):  # thread t → ports[t % n]: per_process threads on each
            self.through[i] += per_thread * self.o.per_process
        return sample

    def measure(self, target: Target) -> None:
        rows = range(1, self.o.procs + 1)
        sizes = {}
        self.step("warm-up: every process, its pool and its statements …")
        for n in rows:
            self.drive_on(target, n, self.o.per_process * n * 20)
        for n in rows:
            warm = self.drive_on(target, n, self.o.per_process * n * 25).stats()
            sizes[n] = int(max(self.o.per_process * n * 10, warm["calls_per_s"] * self.seconds))
        self.results["rss_warm_kb"] = [vm_rss_kb(pid) for pid in self.pids(self.o.procs)]
        self.results["pool_backends_after_warmup"] = pool_backends(self.o.database_url, self.dbname)
        rounds = self.o.rounds
        counts = ", ".join(f"{self.o.per_process * n}" for n in rows)
        self.step(
            f"measuring: 1 to {self.o.procs} processes, {counts} client threads;"
            f" {rounds} interleaved rounds of about {self.seconds:g} s each …"
        )
        downstream = self.procs.pid("downstream")
        totals = {n: Sample() for n in rows}
        meters = {n: CpuMeter(self.pids(n), self.dbname) for n in rows}
        splits = {n: CpuSplit(self.pids(n), downstream, self.dbname) for n in rows}
        waits = {n: WaitSampler(self.o.database_url, self.dbname) for n in rows}
        self.results["cpu_busy_before"] = cpu_busy()
        for r in range(rounds):
            for n in rows if r % 2 == 0 else reversed(rows):
                conc = self.o.per_process * n
                count = max(1, sizes[n] // rounds // conc) * conc
                splits[n].start()
                waits[n].start()
                with meters[n].measuring(count):
                    totals[n].add(self.drive_on(target, n, count))
                waits[n].stop()
                splits[n].stop()
            self.say(f"  round {r + 1}/{rounds} done")
        self.results["cpu_busy_after"] = cpu_busy()
        self.results["rows"] = [
            {
                "procs": n,
                "conc": self.o.per_process * n,
                **totals[n].stats(),
                **meters[n].per_call_ms(),
                "cpu_split": splits[n].shares(),
                "waits": waits[n].summary(),
            }
            for n in rows
        ]

    def memory(self, target: Target) -> None:
        """Each process's VmRSS once at least `--rss-calls` calls have gone through it."""
        short = [max(0, self.o.rss_calls - done) for done in self.through]
        if any(short):
            self.step(
                f"memory: topping every process up to {self.o.rss_calls:,} calls "
                f"({sum(short):,} more writes) …"
            )
        for i, missing in enumerate(short):
            if not missing:
                continue
            target.ports = [self.ports[i]]
            per = self.o.per_process
            total = -(-missing // per) * per
            drive(target, per, total)
            self.through[i] += total
        self.results["memory"] = [
            {
                "process": i,
                "pid": pid,
                "calls": self.through[i],
                "rss_warm_kb": self.results["rss_warm_kb"][i],
                "rss_kb": vm_rss_kb(pid),
            }
            for i, pid in enumerate(self.pids(self.o.procs))
        ]
        for name in self.names:
            self.procs.check_alive(name)

    def run(self) -> None:
        """The bench, step by step, into self.results."""
        self.say(f"scale: {os.cpu_count()} CPUs, {cpu_busy() or 0:.0%} busy before the bench")
        target = self.setup()
        self.measure(target)
        self.memory(target)

    def save(self) -> None:
        self.results["run"] = {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "git": git_rev(),
            "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "seconds_per_row": self.seconds,
            "rounds": self.o.rounds,
            "pool_max": int(os.getenv("TOOLOPS_DB_POOL_MAX", "20")),
            "api_threads": int(
                os.getenv("TOOLOPS_API_THREADS", os.getenv("TOOLOPS_DB_POOL_MAX", "20"))
            ),
            "balancing": "client-side round robin: each client thread keeps one connection to "
            "one process, threads dealt over the ports in turn",
        }
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps(self.results, indent=2, default=str) + "\n")


def main(argv: list[str] | None = None) -> int:
    o = parse_options(argv)
    started = time.monotonic()
    with (
        tempfile.TemporaryDirectory(prefix="toolops-bench-scale-") as tmpdir,
        interrupts_as_exceptions(),
    ):
        tmp = Path(tmpdir)
        procs = Processes(tmp)
        scale = Scale(o, tmp, procs)
        status = guarded(procs, "bench (scale)", scale.run)
    if status:
        return status
    print_scale(scale.results, scale.say)
    scale.save()
    print(f"(scale: {time.monotonic() - started:.0f} s; {RESULTS.relative_to(ROOT)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
