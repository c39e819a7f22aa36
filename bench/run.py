"""ToolOps benchmark (`make bench`): the executor's cost against the framework floor and
the closest durable-execution peer.

All in one run, on one machine, so that the figures are ratios:

- direct        the no-op downstream alone (the HTTP tool every tool here points at);
- floor         a bare DRF endpoint (bench/floor) validating the body and doing the three
                writes a call needs at minimum — claim, result, span — in one transaction;
- physical      a bare ASGI app (bench/physical.py) doing what a budgeted write physically
                must: read the run, claim + charge + insert the call, call the downstream,
                record — three statements through raw psycopg;
- DBOS          DBOS Transact behind a bare ASGI app (bench/dbos_peer.py): a workflow with
                one step that POSTs to the same downstream, a new workflow ID per call;
- write         POST /api/v1/runs/{run}/calls through ToolOps for an `idempotent_write`
                tool (a new idempotency key on every write), in runs without a budget and
                (write_budget) in runs with one, each call reporting its tokens;
- read/replay   the same for a `read` tool, and the same write request again and again.

p50, p99 and calls/s at concurrency 1 and 8 in interleaved rounds, CPU per call, the
targets with PASS/MISS, the SQL statements of one call (in-process), and how uvicorn
should serve ToolOps (measured). Writes bench/results/latest.json. See bench/README.md.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import platform
import secrets
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

ROOT = Path(__file__).resolve().parent.parent
# First, before this folder: bench/traces.py must not shadow the traces package.
sys.path.insert(0, str(ROOT))

from bench.cases import (  # noqa: E402 - after the path is set
    BUDGET,
    CATALOG,
    DBOS_APP,
    DOWNSTREAM_APP,
    FLOOR_APP,
    PARAMS_SCHEMA,
    PHYSICAL_APP,
    TOOLOPS_APP,
    TOOLOPS_WSGI_APP,
    budget_run_ids,
    check_budget_run,
    client_costs,
    create_runs,
    dbos_target,
    direct_target,
    floor_target,
    physical_run_ids,
    physical_target,
    ping_target,
    prime_replay,
    toolops_run_ids,
    toolops_targets,
)
from bench.cpu import CpuMeter, cpu_busy  # noqa: E402
from bench.db import calibrate_database, database_name, fresh_database  # noqa: E402
from bench.load import CONCURRENCY, Sample, Target, drive  # noqa: E402
from bench.options import parse_options  # noqa: E402
from bench.physical import create_tables  # noqa: E402
from bench.probes import probe_dbos, probe_downstreams, probe_serving  # noqa: E402
from bench.procs import (  # noqa: E402
    AGENT_RATE_LIMIT,
    BENCH,
    HOST,
    PY,
    BenchError,
    Fleet,
    Processes,
    Serving,
    free_ports,
    guarded,
    interrupts_as_exceptions,
    run_checked,
    uvicorn_argv,
    wait_http,
)
from bench.report import (  # noqa: E402
    LABELS,
    dbos_version,
    git_rev,
    print_report,
    write_results,
)
from bench.sqlcount import collect as collect_statements  # noqa: E402


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
        self.env["BENCH_DBOS_DATABASE_URL"] = options.dbos_database_url
        self.dbos_mode = options.dbos_mode

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
            [
                PY,
                "-m",
                "django",
                "migrate",
                "floor",
                "--noinput",
                "-v0",
                "--settings",
                "bench.floor.settings",
            ],
            self.env,
            "migrate (floor)",
        )
        create_tables(self.o.database_url, physical_run_ids())
        out = run_checked(
            [PY, "manage.py", "create_agent", "bench", "--rate-limit", str(AGENT_RATE_LIMIT)],
            self.env,
            "create_agent",
        )
        self.token = out.strip().splitlines()[-1].strip()
        self.step(f"database: fresh {self.o.dbos_database_url} for DBOS, migrate …")
        if importlib.util.find_spec("dbos") is None:
            raise BenchError("DBOS Transact, the peer, is not installed: pip install -e '.[bench]'")
        fresh_database(self.o.dbos_database_url)
        run_checked([PY, str(BENCH / "dbos_peer.py"), "--migrate"], self.env, "DBOS migrate")

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

    def write_catalog(self, downstream_port: int) -> None:
        text = CATALOG.format(url=f"http://{HOST}:{downstream_port}", schema=PARAMS_SCHEMA)
        (self.tmp / "catalog.toml").write_text(text)
        self.env["BENCH_DOWNSTREAM_URL"] = f"http://{HOST}:{downstream_port}"

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
        create_runs(fleet.ports[0], self.token, budget_run_ids(prefix), BUDGET)
        tcids = self.o.tool_call_id
        prime_replay(fleet.ports[0], self.token, prefix, tool_call_ids=tcids)
        return fleet, toolops_targets(fleet.ports, self.token, prefix, tool_call_ids=tcids)

    def start_dbos(self, serving: Serving, mode: str, name: str) -> Fleet:
        """The DBOS peer served like ToolOps: the same uvicorn flags, processes and ports."""
        env = {**self.env, "BENCH_DBOS_MODE": mode}
        fleet = Fleet(self.procs, name, DBOS_APP, serving, env)
        fleet.wait("/")
        return fleet

    def start_cases(
        self, serving: Serving, downstream_port: int
    ) -> tuple[dict[str, Target], dict[str, list[int]], list[Fleet]]:
        """Every server of the measurement, started: each case's target, the pids of the
        servers whose CPU it counts, and the fleets (ToolOps' first) to stop."""
        floor = Fleet(self.procs, "floor", FLOOR_APP, serving, self.env)
        physical = Fleet(self.procs, "physical", PHYSICAL_APP, serving, self.env)
        dbos = self.start_dbos(serving, self.dbos_mode, "dbos")
        toolops, targets = self.start_toolops(serving, "main")
        floor.wait("/")
        physical.wait("/")
        cases: dict[str, Target] = {
            "direct": direct_target(downstream_port),
            "floor": floor_target(floor.ports),
            "physical": physical_target(physical.ports),
            "dbos": dbos_target(dbos.ports, "main"),
            "write": targets["write"],
            "write_budget": targets["write_budget"],
            "read": targets["read"],
            "replay": targets["replay"],
            "ping": ping_target(floor.ports),
        }
        servers = {
            **{name: toolops.pids() for name in targets},
            "direct": [self.procs.pid("downstream")],
            "floor": floor.pids(),
            "ping": floor.pids(),
            "physical": physical.pids(),
            "dbos": dbos.pids(),
        }
        return cases, servers, [toolops, floor, physical, dbos]

    def measure(self, serving: Serving, downstream_port: int) -> None:
        self.step(
            f"measuring: ToolOps, floor, physical and DBOS ({self.dbos_mode} workflows)"
            f" served as {serving.label} …"
        )
        cases, servers, fleets = self.start_cases(serving, downstream_port)
        rounds = max(1, self.o.rounds)
        sizes: dict[tuple[str, int], int] = {}
        for name, target in cases.items():  # warm-up: every process, pool and code path
            drive(target, 8, 20 * 8)
            for c in CONCURRENCY:
                sizes[(name, c)] = self.sized(target, c, self.seconds, lo=100 * rounds)
        totals = {key: Sample() for key in sizes}
        toolops_db = database_name(self.o.database_url)
        dbos_db = database_name(self.o.dbos_database_url)
        meters = {
            key: CpuMeter(servers[key[0]], dbos_db if key[0] == "dbos" else toolops_db)
            for key in sizes
        }
        for r in range(rounds):  # interleaved, so a burst of outside load hits every case
            for c in CONCURRENCY:
                for name, target in cases.items():
                    count = sizes[(name, c)] // rounds
                    with meters[(name, c)].measuring(count):
                        totals[(name, c)].add(drive(target, c, count))
            self.say(f"  round {r + 1}/{rounds} done")
        self.results["budget_runs"] = check_budget_run(fleets[0].ports[0], self.token, "main")
        for fleet in fleets:
            fleet.stop()
        self.results["dbos_mode"] = self.dbos_mode
        self.results["serving"] = {
            "mode": serving.mode,
            "n": serving.n,
            "loop": serving.loop,
            "label": serving.label,
        }
        self.results["rows"] = [
            {
                "case": name,
                "label": LABELS[name],
                "conc": c,
                **totals[(name, c)].stats(),
                **meters[(name, c)].per_call_ms(),
            }
            for c in CONCURRENCY
            for name in cases
        ]
        self.results["clients_c1"] = client_costs(downstream_port, 1000)
        busy = cpu_busy()
        self.results["machine_after"] = {"cpu_busy_idle_bench": busy}

    def count_statements(self) -> None:
        self.step("statements: one call of each kind, in-process …")
        try:
            self.results["statements"] = collect_statements({**self.env, "BENCH_TOKEN": self.token})
        except BenchError as exc:  # the load still tells something: go on, say it at the end
            self.results["statements"] = {"error": str(exc)}
            self.say(f"  statement count failed: {str(exc)[-2000:]}")

    def run(self, serving: Serving) -> None:
        """The bench, step by step: set up, probe, measure, report and save."""
        (port,) = free_ports(1)
        self.write_catalog(port)  # before migrate: `check` validates the catalog
        self.setup_database()
        self.machine()
        kind = probe_downstreams(self)
        self.start_downstream(kind, "downstream", port)
        self.count_statements()  # first: the code is the one just migrated
        if not self.o.no_probe:
            probe_serving(self)
        if self.o.dbos_mode == "auto" or self.o.study:
            picked = probe_dbos(self, serving)
            if self.o.dbos_mode == "auto":
                self.dbos_mode = picked
        self.measure(serving, port)
        self.report()
        self.save()

    def report(self) -> None:
        print_report(self.results, self.o, self.say)

    def save(self) -> None:
        write_results(
            self.results,
            {
                "cpus": os.cpu_count(),
                "python": platform.python_version(),
                "platform": platform.platform(),
                "git": git_rev(),
                "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "seconds_per_case": self.seconds,
                "tool_call_id": self.o.tool_call_id,
                "procs": self.o.procs,
                "rounds": self.o.rounds,
                "dbos_mode": self.dbos_mode,
                "dbos_version": dbos_version(),
            },
            self.say,
        )


def main(argv: Sequence[str] | None = None) -> int:
    options, serving = parse_options(argv)
    started = time.monotonic()
    with (
        tempfile.TemporaryDirectory(prefix="toolops-bench-") as tmpdir,
        interrupts_as_exceptions(),
    ):
        tmp = Path(tmpdir)
        procs = Processes(tmp)
        bench = Bench(options, tmp, procs)
        status = guarded(procs, "bench", lambda: bench.run(serving))
    if status:
        return status
    print(f"({time.monotonic() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
