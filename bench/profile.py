"""Where the web process's CPU goes for one budgeted write: a profile of one ToolOps web
process under uvicorn, grouped by stage, in milliseconds of CPU per write.

    .venv/bin/python bench/profile.py                  # 20 s profiled at c=1
    .venv/bin/python bench/profile.py --quick          # 5 s
    .venv/bin/python bench/profile.py --src DIR        # profile the source tree in DIR
    .venv/bin/python bench/profile.py --json           # also bench/results/profile.json

Two phases, each a fresh web process served as bench/run.py serves ToolOps (the same
uvicorn flags, through bench/profiled.py, which runs uvicorn in-process):

1. unprofiled: warm-up, then the budgeted write at concurrency 1; the process's CPU per
   write from /proc (user + system, every thread);
2. profiled: the same with cProfile on every thread of the process, timed by each
   thread's CPU clock, from the measurement's start to its end (signals).

Method: each function's self time (tottime), less what profiling its calls cost
(calibrated in the web process: bench/profiled.py), goes to the stage of its module (C
and standard-library functions no stage names: to their callers' stages, split as
cProfile saw them called), so that the stages sum to the profiled total; every stage is
then scaled by (unprofiled CPU per write) / (that total): the unprofiled phase says what
a write really costs, the profile how it divides. bench/profile_groups.py holds the
stages. See bench/README.md.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import sysconfig
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BENCH_DIR = ROOT / "bench"
# Run by path, this folder is on sys.path: its profile.py (this file) would shadow the
# standard library's, its traces.py the traces app. The checkout's root instead.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != BENCH_DIR]
sys.path.insert(0, str(ROOT))

from bench.cases import (  # noqa: E402 - after the path is set
    BUDGET,
    CATALOG,
    PARAMS_SCHEMA,
    TOOLOPS_APP,
    create_runs,
    toolops_targets,
)
from bench.cpu import CpuMeter, cpu_busy  # noqa: E402
from bench.db import database_name, fresh_database  # noqa: E402
from bench.load import Sample, drive  # noqa: E402
from bench.procs import (  # noqa: E402
    AGENT_RATE_LIMIT,
    HOST,
    PY,
    BenchError,
    Processes,
    free_ports,
    guarded,
    interrupts_as_exceptions,
    run_checked,
    toolops_env,
    uvicorn_argv,
    wait_http,
)
from bench.profile_groups import Overhead, attribute, corrected, top_functions  # noqa: E402
from bench.profile_report import print_profile, write_json  # noqa: E402


def parse_options(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=0, help="profiled seconds (20)")
    parser.add_argument("--quick", action="store_true", help="5 profiled seconds")
    parser.add_argument(
        "--src",
        type=Path,
        default=None,
        help="profile the ToolOps source tree in DIR (its toolops, traces, compensations, "
        "manage.py) instead of this checkout's; the bench code stays this one",
    )
    parser.add_argument("--json", action="store_true", help="write bench/results/profile.json")
    parser.add_argument("--top", type=int, default=25, help="functions listed (25)")
    parser.add_argument("--loop", default="uvloop", choices=["uvloop", "asyncio"])
    parser.add_argument(
        "--database-url",
        default=os.getenv("BENCH_PROFILE_DATABASE_URL", "postgres:///toolops_bench_profile"),
        help="dropped and created afresh (default: $BENCH_PROFILE_DATABASE_URL or "
        "postgres:///toolops_bench_profile)",
    )
    options = parser.parse_args(argv)
    if options.src is not None:
        options.src = options.src.resolve()
        if not (options.src / "toolops" / "asgi.py").is_file():
            parser.error(f"--src: {options.src} holds no ToolOps source tree (toolops/asgi.py)")
    if not options.seconds:
        options.seconds = 5.0 if options.quick else 20.0
    return options


class Profiler:
    def __init__(self, options: argparse.Namespace, tmp: Path, procs: Processes) -> None:
        self.o = options
        self.tmp = tmp
        self.procs = procs
        self.src = options.src or ROOT
        self.env = toolops_env(tmp, options.database_url, tmp / "catalog.toml")
        if options.src is not None:
            # The tree under test alone on the path: none of this checkout's modules.
            self.env["PYTHONPATH"] = str(options.src)
        self.env["BENCH_PROFILE_SRC"] = str(self.src)  # checked by the web process
        self.token = ""
        self.started = time.monotonic()

    def step(self, text: str) -> None:
        print(f"[{time.monotonic() - self.started:4.0f} s] {text}", flush=True)

    def setup(self) -> None:
        port = free_ports(1)[0]
        text = CATALOG.format(url=f"http://{HOST}:{port}", schema=PARAMS_SCHEMA)
        (self.tmp / "catalog.toml").write_text(text)
        self.step(f"database: fresh {self.o.database_url}, migrate ({self.src}), agent …")
        fresh_database(self.o.database_url)
        manage = str(self.src / "manage.py")
        run_checked([PY, manage, "migrate", "--noinput", "-v0"], self.env, "migrate")
        argv = [PY, manage, "create_agent", "bench", "--rate-limit", str(AGENT_RATE_LIMIT)]
        self.token = run_checked(argv, self.env, "create_agent").strip().splitlines()[-1]
        argv = [PY, str(BENCH_DIR / "downstream.py"), "--host", HOST, "--port", str(port)]
        self.procs.start("downstream", argv, self.env)
        wait_http(self.procs, "downstream", port, "/")

    def phase(self, name: str, *, profiled: bool, seconds: float) -> dict[str, Any]:
        """One web process: warm-up, then the budgeted write at c=1 between SIGUSR1 and
        SIGUSR2; its CPU per write from /proc, latencies, and what it wrote."""
        out = self.tmp / name
        out.mkdir()
        env = {**self.env, "BENCH_PROFILE_DIR": str(out)}
        if profiled:
            env["BENCH_PROFILE_CPROFILE"] = "1"
        port = free_ports(1)[0]
        argv = [
            PY,
            str(BENCH_DIR / "profiled.py"),
            *uvicorn_argv(TOOLOPS_APP, port, loop=self.o.loop)[3:],
        ]
        self.procs.start(name, argv, env)
        wait_http(self.procs, name, port, "/healthz")
        create_runs(port, self.token, [f"{name}-b0"], BUDGET)
        target = toolops_targets([port], self.token, name)["write_budget"]
        warm = drive(target, 1, 200 if profiled else 400).stats()
        count = int(max(100, warm["calls_per_s"] * seconds))
        pid = self.procs.pid(name)
        meter = CpuMeter([pid], database_name(self.o.database_url))
        self._signal(pid, signal.SIGUSR1, out / "started")
        with meter.measuring(count):
            sample = drive(target, 1, count)
        self._signal(pid, signal.SIGUSR2, out / "stopped")
        self.procs.stop(name)
        return {"out": out, "writes": count, "sample": sample, **meter.per_call_ms()}

    def _signal(self, pid: int, signum: int, ack: Path) -> None:
        os.kill(pid, signum)
        deadline = time.monotonic() + 10
        while not ack.exists():
            if time.monotonic() > deadline:
                raise BenchError(f"the web process did not acknowledge signal {signum}")
            time.sleep(0.01)

    def run(self) -> dict[str, Any]:
        self.setup()
        busy = cpu_busy()
        unprofiled_s = max(3.0, self.o.seconds / 2)
        self.step(f"unprofiled: the budgeted write at c=1 for ~{unprofiled_s:g} s …")
        plain = self.phase("plain", profiled=False, seconds=unprofiled_s)
        self.step(f"profiled: the same for ~{self.o.seconds:g} s …")
        prof = self.phase("prof", profiled=True, seconds=self.o.seconds)
        stats_file = prof["out"] / "web.prof"
        if not stats_file.is_file():
            raise BenchError(f"the profiled process wrote no profile:\n{self.procs.error_logs()}")
        return analyse(self.o, self.src, plain, prof, stats_file, busy)


def analyse(
    options: argparse.Namespace,
    src: Path,
    plain: dict[str, Any],
    prof: dict[str, Any],
    stats_file: Path,
    busy: float | None,
) -> dict[str, Any]:
    """The stages and top functions in real ms of CPU per write: each self time less
    the profiler's calibrated cost, then scaled by unprofiled / corrected CPU a write."""
    import json
    import pstats

    raw: dict[Any, Any] = pstats.Stats(str(stats_file)).stats  # type: ignore[attr-defined]
    found = {
        phase: json.loads((p["out"] / "process.json").read_text())
        for phase, p in (("unprofiled", plain), ("profiled", prof))
    }
    overhead = Overhead(**found["profiled"]["overhead"])
    stats = corrected(raw, overhead)
    roots = source_roots(src)
    groups, total_s = attribute(stats, roots)
    writes = prof["writes"]
    real_ms = plain["server_cpu_ms"]
    if real_ms is None:
        raise BenchError("no /proc here: the unprofiled CPU per write is unknown")
    per_write = 1000 / writes
    scale = real_ms / (total_s * per_write)
    return {
        "source": str(src),
        "cpus": os.cpu_count(),
        "cpu_busy_idle_bench": busy,
        "unprofiled": {**_phase_json(plain), **_waits_ms(found["unprofiled"], plain["writes"])},
        "profiled": {**_phase_json(prof), **_waits_ms(found["profiled"], writes)},
        "threads_profiled": found["profiled"].get("threads_profiled"),
        "overhead_per_call_ns": {k: v * 1e9 for k, v in found["profiled"]["overhead"].items()},
        "calls_per_write": sum(entry[1] for entry in raw.values()) / writes,
        "profiled_tottime_ms_per_write": attribute(raw, roots)[1] * per_write,
        "corrected_ms_per_write": total_s * per_write,
        "scale": scale,
        "stages": [
            {"stage": name, "ms_per_write": s * per_write * scale, "share": s / total_s}
            for name, s in groups
        ],
        "top": [
            {
                **f,
                "ms_per_write": f["tottime_s"] * per_write * scale,
                "calls_per_write": f["calls"] / writes,
            }
            for f in top_functions(stats, roots, options.top)
        ],
    }


def _phase_json(phase: dict[str, Any]) -> dict[str, Any]:
    sample: Sample = phase["sample"]
    stats = sample.stats()
    return {
        "writes": phase["writes"],
        "p50_ms": stats["p50_ms"],
        "p99_ms": stats["p99_ms"],
        "calls_per_s": stats["calls_per_s"],
        "server_cpu_ms": phase["server_cpu_ms"],
        "db_cpu_ms": phase["db_cpu_ms"],
    }


def _waits_ms(waits: dict[str, float], writes: int) -> dict[str, float]:
    return {
        "psycopg_execute_wall_ms": waits.get("psycopg_execute_s", 0.0) * 1000 / writes,
        "urllib3_urlopen_wall_ms": waits.get("urllib3_urlopen_s", 0.0) * 1000 / writes,
    }


def source_roots(src: Path) -> list[str]:
    """Where module files live, for naming a profiled function's module."""
    paths = sysconfig.get_paths()
    found = {paths["purelib"], paths["platlib"], paths["stdlib"], paths["platstdlib"]}
    found |= {str(src), str(ROOT)}
    found |= {p for p in sys.path if p and Path(p).is_dir()}
    return sorted(found, key=len, reverse=True)


def main(argv: Sequence[str] | None = None) -> int:
    options = parse_options(argv)
    with (
        tempfile.TemporaryDirectory(prefix="toolops-profile-") as tmpdir,
        interrupts_as_exceptions(),
    ):
        procs = Processes(Path(tmpdir))
        profiler = Profiler(options, Path(tmpdir), procs)
        result: dict[str, Any] = {}
        status = guarded(procs, "profile", lambda: result.update(profiler.run()))
    if status:
        return status
    print_profile(result, options, print)
    if options.json:
        write_json(result, print)
    return 0


if __name__ == "__main__":
    sys.exit(main())
