"""bench/profile.py's output: the method, the stage table, the top functions, and
bench/results/profile.json."""

from __future__ import annotations

import argparse
import json
import platform
import time
from collections.abc import Callable
from typing import Any

from bench.procs import BENCH, ROOT

RESULTS = BENCH / "results" / "profile.json"
Say = Callable[..., None]

METHOD = """\
Method: one ToolOps web process (uvicorn, uvloop, httptools, as bench/run.py serves it),
the budgeted write (a new key, tokens: 50) at concurrency 1. cProfile on every thread,
timed by each thread's CPU clock; each function's self time (tottime), less the
profiler's own cost per call (calibrated in the process), counted in the stage of its
module (C and standard-library functions no stage names: in their callers' stages, split
as cProfile saw them called), so the rows sum to the total. Each row is then scaled by
unprofiled CPU per write (/proc, same code, same run) / that total: ms of real CPU per
write. Waiting (for PostgreSQL, the downstream, the next request) uses no CPU and is in
no row: the wall-clock line below the table gives the time inside psycopg's execute and
urllib3's urlopen, waits included."""


def print_profile(result: dict[str, Any], options: argparse.Namespace, say: Say) -> None:
    plain, prof = result["unprofiled"], result["profiled"]
    say()
    say(METHOD)
    say()
    say(f"source: {result['source']}; {result['cpus']} CPUs" + _busy(result))
    say(
        f"unprofiled: {plain['writes']} writes, p50 {plain['p50_ms']:.2f} ms,"
        f" {plain['calls_per_s']:.0f}/s, web CPU {plain['server_cpu_ms']:.3f} ms a write"
        f" (db {plain['db_cpu_ms']:.3f})"
    )
    say(
        f"profiled:   {prof['writes']} writes, p50 {prof['p50_ms']:.2f} ms,"
        f" {prof['calls_per_s']:.0f}/s, web CPU {prof['server_cpu_ms']:.3f} ms a write"
    )
    cost = result["overhead_per_call_ns"]
    say(
        f"cProfile: {result['threads_profiled']} threads, {result['calls_per_write']:.0f} calls"
        f" a write, self times {result['profiled_tottime_ms_per_write']:.3f} ms a write; less"
        f" the profiler's cost ({cost['callee_s']:.0f} ns a call to the callee,"
        f" {cost['caller_s']:.0f} ns to the caller): {result['corrected_ms_per_write']:.3f} ms"
        f" → scaled by {result['scale']:.3f} to the unprofiled CPU"
    )
    say()
    say(f"{'stage':58} {'ms/write':>9} {'share':>6}")
    say("-" * 75)
    for row in result["stages"]:
        say(f"{row['stage']:58} {row['ms_per_write']:9.3f} {row['share']:6.1%}")
    say("-" * 75)
    total = sum(row["ms_per_write"] for row in result["stages"])
    say(f"{'total (= unprofiled web CPU per write)':58} {total:9.3f} {1:6.1%}")
    say()
    say(
        "wall clock a write, waits included (unprofiled / profiled): psycopg execute"
        f" {plain['psycopg_execute_wall_ms']:.3f} / {prof['psycopg_execute_wall_ms']:.3f} ms,"
        f" urllib3 urlopen {plain['urllib3_urlopen_wall_ms']:.3f} /"
        f" {prof['urllib3_urlopen_wall_ms']:.3f} ms"
    )
    say()
    say(f"top {options.top} functions by self time (scaled ms per write):")
    say(f"{'ms/write':>9} {'calls/write':>11}  function")
    for row in result["top"]:
        say(f"{row['ms_per_write']:9.3f} {row['calls_per_write']:11.1f}  {row['function']}")


def _busy(result: dict[str, Any]) -> str:
    busy = result.get("cpu_busy_idle_bench")
    if busy is None:
        return ""
    warn = " (others' work: figures inflated)" if busy > 0.25 else ""
    return f"; CPUs {busy:.0%} busy before the run{warn}"


def write_json(result: dict[str, Any], say: Say) -> None:
    result = {
        **result,
        "run": {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        },
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    say(f"\nwritten: {RESULTS.relative_to(ROOT)}")
