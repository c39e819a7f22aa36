"""The probes before the measurement: which no-op downstream is faster, and how uvicorn
should serve ToolOps (one process, --workers N, or N processes on N ports)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from bench.cases import direct_target
from bench.cpu import CpuMeter
from bench.db import database_name
from bench.load import CONCURRENCY, drive
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
        rows.append({"serving": serving.label, "mode": serving.mode, "n": serving.n,
                     "loop": serving.loop, "c1": c1, "c8": c8, "stall": stall})  # fmt: skip
        bench.say(
            f"  {serving.label:34} c1 p50 {c1['p50_ms']:6.2f} ms | c8 p50 {c8['p50_ms']:6.2f}"
            f" p99 {c8['p99_ms']:6.1f} ms {c8['calls_per_s']:4.0f}/s"
            f" | CPU/call srv {fmt_ms(c8['server_cpu_ms'])} db {fmt_ms(c8['db_cpu_ms'])} ms"
            + ("   ← delayed-ACK stall" if stall else "")
        )
    bench.results["serving_probe"] = rows
    stalled = [r["serving"] for r in rows if r["stall"]]
    bench.say(
        "  → stall (TCP_NODELAY off): " + (", ".join(stalled) if stalled else "none")
        + ". asyncio sets TCP_NODELAY only on sockets whose proto is IPPROTO_TCP; "
        "uvicorn --workers binds with proto 0. uvloop sets it on every TCP socket."
    )  # fmt: skip
