"""ToolOps benchmark, flat with data (`make bench` runs it after bench/traces.py): does a
write cost the same when the tables are big?

- two databases on the local PostgreSQL, both migrated: `toolops_bench_flat_small` with
  10,000 idempotency records, calls and attempts, and `toolops_bench_flat_big` with
  10,000,000 of each (`--rows`), bulk-loaded inside PostgreSQL (bench/flat_load.py says
  how and why). The small one is made afresh every time; the big one is kept between runs
  when its load is complete, of the same size, layout and migrations, and less than the
  records' TTL (7 days) old (`--reload` loads it again);
- the indexes of the loaded tables read into the OS page cache first (pg_prewarm), as a
  server taking writes holds them (`--cold` skips it);
- each served by its own ToolOps process, as bench/run.py serves ToolOps, with the same
  no-op downstream and catalog;
- the write (a new call per request), in runs with a budget and without, at concurrency 1
  in interleaved rounds between the two servers: p50, p99, CPU per call, and the goal
  big p50 ≤ 1.1 × small p50;
- EXPLAIN (ANALYZE, BUFFERS, WAL) of the claim, record and look-up statements of real
  writes on both databases (bench/flat_explain.py): the indexes they use, that none scans
  a loaded table, their time, buffers and WAL; pg_stat_statements' times when the server
  loads it;
- the console's list pages (runs, filtered, unknown calls, approvals, tickets) and its
  search (by idempotency key, call_id, run_id), rendered in-process on both databases
  (bench/flat_console.py): p50, the goal big p50 ≤ 1.5 × small p50, and no sequential
  scan of a loaded table in any of their queries.

Writes bench/results/flat.json.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# First, before this folder: bench/traces.py must not shadow the traces package.
sys.path.insert(0, str(ROOT))

from bench import flat_console, flat_load  # noqa: E402 - after the path is set
from bench.cases import (  # noqa: E402
    BUDGET,
    CATALOG,
    PARAMS_SCHEMA,
    TOOLOPS_APP,
    budget_run_ids,
    create_runs,
    toolops_run_ids,
    toolops_targets,
)
from bench.cpu import CpuMeter, cpu_busy  # noqa: E402
from bench.flat_databases import FlatDatabases, connect, database_url  # noqa: E402
from bench.flat_options import NAMES, parse_options  # noqa: E402
from bench.flat_report import (  # noqa: E402
    print_console,
    print_explain,
    print_table,
    statement_times,
)
from bench.load import Sample, Target, drive  # noqa: E402
from bench.procs import (  # noqa: E402
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

RESULTS = BENCH / "results" / "flat.json"
SMALL_ROWS = 10_000
GOAL = 1.1
CASES = {"write_budget": "write (budget)", "write": "write (no budget)"}


class Flat(FlatDatabases):
    def __init__(self, o: argparse.Namespace, tmp: Path, procs: Processes) -> None:
        self.o = o
        self.tmp = tmp
        self.procs = procs
        self.started = time.monotonic()
        self.urls = {side: database_url(o.database_url, name) for side, name in NAMES.items()}
        self.rows = {"small": min(SMALL_ROWS, o.rows), "big": o.rows}
        self.stamp = format(int(time.time()), "x")  # run ids and agent names of this run
        self.base_env = {
            **os.environ,
            "TOOLOPS_DATA_DIR": str(tmp / "data"),
            "TOOLOPS_TOOLS_FILE": str(tmp / "catalog.toml"),
            "DJANGO_SECRET_KEY": secrets.token_urlsafe(40),
            "DJANGO_DEBUG": "0",
            "TOOLOPS_LOG_LEVEL": "WARNING",
            "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.getenv("PYTHONPATH", "")) if p),
        }
        for name in [k for k in self.base_env if k.startswith("OTEL_")]:
            self.base_env.pop(name)
        self.base_env.pop("DJANGO_SETTINGS_MODULE", None)
        self.tokens: dict[str, str] = {}
        self.results: dict[str, Any] = {"goal_ratio": GOAL, "databases": {}}

    def step(self, text: str) -> None:
        self.say(f"[{time.monotonic() - self.started:4.0f} s] {text}")

    def env(self, side: str) -> dict[str, str]:
        return {**self.base_env, "DATABASE_URL": self.urls[side]}

    # -- the measuring

    def prewarm(self) -> None:
        if self.o.cold:
            self.step("indexes not prewarmed (--cold): some of them come from disk")
            self.results["prewarmed_bytes"] = None
            return
        started = time.monotonic()
        read = 0
        for side in NAMES:
            with connect(self.urls[side]) as conn:
                got = flat_load.prewarm(conn)
            if got is None:
                self.step("pg_prewarm is not available: indexes not prewarmed")
                self.results["prewarmed_bytes"] = None
                return
            read += got
        self.results["prewarmed_bytes"] = read
        self.step(
            f"indexes of the loaded tables read into the OS page cache (pg_prewarm): "
            f"{read / 1024**3:.1f} GiB in {time.monotonic() - started:.0f} s"
        )

    def serve(self) -> tuple[dict[str, int], dict[str, dict[str, Target]]]:
        downstream, *ports = free_ports(3)
        (self.tmp / "catalog.toml").write_text(
            CATALOG.format(url=f"http://{HOST}:{downstream}", schema=PARAMS_SCHEMA)
        )
        self.procs.start(
            "downstream",
            [PY, str(BENCH / "downstream.py"), "--host", HOST, "--port", str(downstream)],
            self.base_env,
        )
        wait_http(self.procs, "downstream", downstream, "/")
        served, targets = {}, {}
        for side, port in zip(NAMES, ports, strict=True):
            name = f"toolops-{side}"
            self.procs.start(name, uvicorn_argv(TOOLOPS_APP, port, loop="uvloop"), self.env(side))
            wait_http(self.procs, name, port, "/api/v1/schema/?format=json")
            prefix = f"flat-{self.stamp}-{side}"
            create_runs(port, self.tokens[side], toolops_run_ids(prefix))
            create_runs(port, self.tokens[side], budget_run_ids(prefix), BUDGET)
            served[side] = port
            found = toolops_targets([port], self.tokens[side], prefix)
            targets[side] = {case: found[case] for case in CASES}
        return served, targets

    def measure(self, targets: dict[str, dict[str, Target]]) -> None:
        calls = self.o.calls or (800 if self.o.quick else 3000)
        rounds = max(1, self.o.rounds or (8 if self.o.quick else 20))
        per_round = max(1, calls // rounds)
        self.step(
            f"measuring: {per_round * rounds} writes per database and case at concurrency 1,"
            f" {rounds} interleaved rounds …"
        )
        for side in NAMES:  # warm-up: the pool, the caches, the statements prepared
            for case in CASES:
                drive(targets[side][case], 1, 200)
        busy = cpu_busy()
        self.results["cpu_busy_before"] = busy
        totals = {(side, case): Sample() for side in NAMES for case in CASES}
        meters = {
            (side, case): CpuMeter([self.procs.pid(f"toolops-{side}")], NAMES[side])
            for side in NAMES
            for case in CASES
        }
        ratios: dict[str, list[float]] = {case: [] for case in CASES}
        checkpoints = self.checkpoints()
        for r in range(rounds):
            for case in CASES:
                p50 = {}
                # Both sides each round, in alternating order, so that drift hits both alike.
                for side in ("small", "big") if r % 2 == 0 else ("big", "small"):
                    with meters[(side, case)].measuring(per_round):
                        sample = drive(targets[side][case], 1, per_round)
                    totals[(side, case)].add(sample)
                    p50[side] = float(sample.stats()["p50_ms"] or 0.0)
                ratios[case].append(p50["big"] / p50["small"])
            if (r + 1) % max(1, rounds // 4) == 0:
                self.say(f"  round {r + 1}/{rounds} done")
        self.results["checkpoints_during"] = self.checkpoints() - checkpoints
        self.results["cpu_busy_after"] = cpu_busy()
        self.results["rows"] = [
            {
                "side": side,
                "case": case,
                "label": CASES[case],
                **totals[(side, case)].stats(),
                **meters[(side, case)].per_call_ms(),
            }
            for case in CASES
            for side in NAMES
        ]
        self.results["round_ratios"] = ratios
        self.results["goals"] = []
        for case, label in CASES.items():
            small, big = (self.row(side, case) for side in NAMES)
            ratio = big["p50_ms"] / small["p50_ms"]
            self.results["goals"].append(
                {
                    "goal": f"flat with data ≤ {GOAL}×",
                    "case": case,
                    "value": ratio,
                    "limit": GOAL,
                    "pass": ratio <= GOAL,
                    "round_median": statistics.median(ratios[case]),
                    "text": f"{label}: {self.label('big')} p50 {big['p50_ms']:.2f} / "
                    f"{self.label('small')} p50 {small['p50_ms']:.2f} = {ratio:.3f}×",
                }
            )

    def row(self, side: str, case: str) -> dict[str, Any]:
        return next(r for r in self.results["rows"] if r["side"] == side and r["case"] == case)

    def label(self, side: str) -> str:
        rows = self.rows[side]
        return f"{rows // 1_000_000}M" if rows >= 1_000_000 else f"{rows // 1000}k"

    def checkpoints(self) -> int:
        with connect(self.urls["small"]) as conn:
            timed, req = conn.execute(
                "SELECT checkpoints_timed, checkpoints_req FROM pg_stat_bgwriter"
            ).fetchone()
        return int(timed) + int(req)

    def explain(self) -> None:
        calls = 20 if self.o.quick else 40
        self.step(f"EXPLAIN (ANALYZE, BUFFERS, WAL): {calls} writes on each database …")
        found = {}
        for side in NAMES:
            env = {**self.env(side), "BENCH_TOKEN": self.tokens[side]}
            out = run_checked(
                [
                    PY,
                    str(BENCH / "flat_explain.py"),
                    "--calls",
                    str(calls),
                    "--prefix",
                    f"flat-{self.stamp}-{side}",
                ],
                env,
                f"EXPLAIN ({side})",
            )
            found[side] = json.loads(out.strip().splitlines()[-1])
        self.results["explain"] = found

    def run(self) -> None:
        """The bench, step by step, into self.results."""
        (self.tmp / "catalog.toml").write_text(  # before migrate: `check` reads the catalog
            CATALOG.format(url=f"http://{HOST}:1", schema=PARAMS_SCHEMA)
        )
        self.say(f"flat with data: CPUs {cpu_busy() or 0:.0%} busy before the bench")
        self.disk()
        self.prepare("small")
        self.prepare("big")
        self.prewarm()
        statement_times(self.urls, reset=True)
        _ports, targets = self.serve()
        self.measure(targets)
        self.results["statement_times"] = statement_times(self.urls, reset=False)
        self.procs.stop("toolops-small")
        self.procs.stop("toolops-big")
        self.explain()
        self.step("console: list pages and search, rendered in-process on each database …")
        envs = {side: self.env(side) for side in NAMES}
        self.results["console"] = flat_console.measure_sides(envs, 7 if self.o.quick else 15)


def main(argv: list[str] | None = None) -> int:
    o = parse_options(argv)
    started = time.monotonic()
    with (
        tempfile.TemporaryDirectory(prefix="toolops-bench-flat-") as tmpdir,
        interrupts_as_exceptions(),
    ):
        tmp = Path(tmpdir)
        procs = Processes(tmp)
        flat = Flat(o, tmp, procs)
        status = guarded(procs, "bench (flat)", flat.run)
    if status:
        return status
    print_table(flat.results, flat.label, flat.say)
    print_explain(flat.results, flat.label, flat.say)
    print_console(flat.results, flat.label, flat.say)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(flat.results, indent=2, default=str) + "\n")
    print(f"(flat: {time.monotonic() - started:.0f} s; {RESULTS.relative_to(ROOT)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
