"""The probes before the measurement: which no-op downstream is faster, how uvicorn should
serve ToolOps (one process, --workers N, or N processes on N ports), and which way of
running DBOS workflows (sync or async) is faster."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from bench.cases import dbos_target, direct_target
from bench.cpu import CpuMeter
from bench.db import database_name
from bench.load import CONCURRENCY, Sample, drive
from bench.procs import Serving
from bench.report import fmt_ms

if TYPE_CHECKING:
    from bench.run import Bench


def probe_downstreams(bench: Bench) -> str:
    """stdlib ThreadingHTTPServer vs uvicorn + raw ASGI: the faster becomes `direct`."""
    bench.step("downstream: stdlib ThreadingHTTPServer vs uvicorn raw ASGI …")
    found: dict[str, dict[str, Any]] = {}
    for kind in ("stdlib", "asgi"):
        port = bench.start_downstream(kind, f"probe-downstream-{kind}")
        target = direct_target(port)
        drive(target, 8, 400)
        found[kind] = {
            f"c{c}": drive(target, c, bench.sized(target, c, 1.0, lo=500)).stats()
            for c in CONCURRENCY
        }
        bench.procs.stop(f"probe-downstream-{kind}")
    pick = bench.o.downstream
    if pick == "auto":
        pick = min(found, key=lambda k: found[k]["c1"]["p50_ms"] + found[k]["c8"]["p50_ms"])
    for kind, stats in found.items():
        bench.say(
            f"  {kind:7} p50 c1 {stats['c1']['p50_ms']:.3f} ms, c8 {stats['c8']['p50_ms']:.3f}"
            f" ms, {stats['c8']['calls_per_s']:.0f} calls/s at c8"
            + ("   ← used" if kind == pick else "")
        )
    bench.results["downstream_probe"] = {"used": pick, **found}
    return pick


def probe_serving(bench: Bench) -> None:
    """uvicorn --workers N vs one process vs N processes: keep-alive ToolOps write
    calls, p50 at conc 1 (a delayed-ACK stall shows as ~40 ms) and at conc 8."""
    n = bench.o.procs
    modes = [
        Serving("single", 1, "uvloop"),
        Serving("workers", n, "uvloop"),
        Serving("workers", n, "asyncio"),
        Serving("procs", n, "uvloop"),
    ]
    if bench.o.study:
        cpus = os.cpu_count() or 2
        others = sorted({cpus, cpus + 1, 2 * cpus} - {n})
        modes += [Serving("single", 1, "asyncio"), Serving("procs", n, "asyncio")]
        modes += [Serving("workers", k, "uvloop") for k in others]
        modes += [Serving("procs", k, "uvloop") for k in others]
        modes += [Serving("procs", n, "uvloop", variant="lean")]
        modes += [Serving("procs", n, "uvloop", variant="prepared")]
        modes += [Serving("single", 1, "uvloop", wsgi=True)]
        modes += [Serving("procs", n, "uvloop", wsgi=True)]
    bench.step("serving: how uvicorn should serve ToolOps (write calls, keep-alive) …")
    rows = []
    seconds = max(1.0, bench.seconds * 0.4)
    for i, serving in enumerate(modes):
        fleet, targets = bench.start_toolops(serving, f"probe{i}")
        try:
            write = targets["write"]
            drive(write, 8, 20 * 8)  # warm-up (every worker, hopefully)
            meter = CpuMeter(fleet.pids(), database_name(bench.o.database_url))
            count = bench.sized(write, 1, seconds, lo=30)
            with meter.measuring(count):
                c1 = drive(write, 1, count).stats()
            c1.update(meter.per_call_ms())
            meter = CpuMeter(fleet.pids(), database_name(bench.o.database_url))
            count = bench.sized(write, 8, seconds, lo=80)
            with meter.measuring(count):
                c8 = drive(write, 8, count).stats()
            c8.update(meter.per_call_ms())
        finally:
            fleet.stop()
        stall = c1["p50_ms"] > 30
        rows.append(
            {
                "serving": serving.label,
                "mode": serving.mode,
                "n": serving.n,
                "loop": serving.loop,
                "c1": c1,
                "c8": c8,
                "stall": stall,
            }
        )
        bench.say(
            f"  {serving.label:34} c1 p50 {c1['p50_ms']:6.2f} ms | c8 p50 {c8['p50_ms']:6.2f}"
            f" p99 {c8['p99_ms']:6.1f} ms {c8['calls_per_s']:4.0f}/s"
            f" | CPU/call srv {fmt_ms(c8['server_cpu_ms'])} db {fmt_ms(c8['db_cpu_ms'])} ms"
            + ("   ← delayed-ACK stall" if stall else "")
        )
    bench.results["serving_probe"] = rows
    stalled = [r["serving"] for r in rows if r["stall"]]
    bench.say(
        "  → stall (TCP_NODELAY off): "
        + (", ".join(stalled) if stalled else "none")
        + ". asyncio sets TCP_NODELAY only on sockets whose proto is IPPROTO_TCP; "
        "uvicorn --workers binds with proto 0. uvloop sets it on every TCP socket."
    )


def probe_dbos(bench: Bench, serving: Serving) -> str:
    """DBOS's sync workflows (run in a worker thread) vs its async ones (awaited on the
    event loop), both served as the measurement serves them, in interleaved rounds: the
    cheaper (server + database CPU per call, at conc 1 and 8) is the peer."""
    bench.step("DBOS: sync workflows in a worker thread vs async workflows on the loop …")
    modes = ("sync", "async")
    fleets = {mode: bench.start_dbos(serving, mode, f"probe-dbos-{mode}") for mode in modes}
    dbname = database_name(bench.o.dbos_database_url)
    try:
        targets = {mode: dbos_target(fleets[mode].ports, f"probe-{mode}") for mode in modes}
        sizes = {}
        for mode, target in targets.items():
            drive(target, 8, 20 * 8)
            for c in CONCURRENCY:
                sizes[(mode, c)] = bench.sized(target, c, max(1.0, bench.seconds * 0.4), lo=60)
        totals = {key: Sample() for key in sizes}
        meters = {key: CpuMeter(fleets[key[0]].pids(), dbname) for key in sizes}
        for r in range(2):
            for c in CONCURRENCY:
                for mode in modes if r % 2 == 0 else modes[::-1]:
                    count = sizes[(mode, c)] // 2
                    with meters[(mode, c)].measuring(count):
                        totals[(mode, c)].add(drive(targets[mode], c, count))
    finally:
        for fleet in fleets.values():
            fleet.stop()
    found: dict[str, dict[str, Any]] = {
        mode: {
            f"c{c}": {**totals[(mode, c)].stats(), **meters[(mode, c)].per_call_ms()}
            for c in CONCURRENCY
        }
        for mode in modes
    }

    def cpu(mode: str) -> float:
        return sum((s["server_cpu_ms"] or 0) + (s["db_cpu_ms"] or 0) for s in found[mode].values())

    # By CPU per call: on a small shared machine it is steadier than latency, which a
    # burst of outside load moves by more than the two modes differ.
    pick = min(modes, key=cpu)
    for mode, stats in found.items():
        c1, c8 = stats["c1"], stats["c8"]
        bench.say(
            f"  {mode:5}  c1 p50 {c1['p50_ms']:6.2f} ms | c8 p50 {c8['p50_ms']:6.2f} p99"
            f" {c8['p99_ms']:6.1f} ms {c8['calls_per_s']:4.0f}/s | CPU/call srv"
            f" {fmt_ms(c8['server_cpu_ms'])} db {fmt_ms(c8['db_cpu_ms'])} ms"
            + ("   ← used" if mode == pick else "")
        )
    bench.results["dbos_probe"] = {"used": pick, **found}
    return pick
