"""ToolOps benchmark, traces part (`make bench` runs it after bench/run.py):

- export cost  the write path (POST /api/v1/runs/{run}/calls, an `idempotent_write` to the
               no-op downstream, concurrency 1) served by two ToolOps processes side by
               side, one exporting spans over OTLP/HTTP to a local receiver and one not;
               interleaved rounds; the p50 difference (target ≤ 0.3 ms);
- span rows    rows stored per call (the call row is its span, each attempt row a child
               span) and spans exported per call, as the receiver counted them;
- timeline     the server render time of a run page with 1,000 calls (target < 300 ms),
               from bench/timeline.py.

Writes bench/results/traces.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# First, before this folder: bench/traces.py must not shadow the traces package.
sys.path.insert(0, str(ROOT))

from bench.cases import (  # noqa: E402 - after the path is set
    CATALOG,
    PARAMS_SCHEMA,
    create_runs,
    toolops_run_ids,
    toolops_targets,
)
from bench.cpu import group_cpu_s  # noqa: E402
from bench.load import Sample, drive  # noqa: E402
from bench.procs import (  # noqa: E402
    BENCH,
    HOST,
    PY,
    BenchError,
    Processes,
    agent_database,
    free_ports,
    run_checked,
    toolops_env,
    uvicorn_argv,
    wait_http,
)

RESULTS = BENCH / "results" / "traces.json"
EXPORT_TARGET_MS = 0.3
TIMELINE_TARGET_MS = 300.0


def span_rows(env: dict[str, str], prefix: str) -> dict[str, float]:
    """Stored rows per call of the runs named `prefix-…`, read with psql-free SQL."""
    import psycopg

    with psycopg.connect(env["DATABASE_URL"]) as conn:
        calls, attempts = conn.execute(
            "SELECT count(DISTINCT c.id), count(a.id) FROM toolops_toolcall c "
            "JOIN toolops_run r ON r.id = c.run_id "
            "LEFT JOIN toolops_attempt a ON a.call_id = c.id WHERE r.run_id LIKE %s",
            [f"{prefix}-%"],
        ).fetchone()
    return {"calls": calls, "attempt_rows": attempts, "rows_per_call": (calls + attempts) / calls}


def sink_count(port: int) -> int:
    import http.client

    conn = http.client.HTTPConnection(HOST, port, timeout=5)
    conn.request("GET", "/count")
    count = json.loads(conn.getresponse().read())["spans"]
    conn.close()
    return int(count)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="ToolOps benchmark: traces.")
    parser.add_argument("--calls", type=int, default=4000, help="write calls per side")
    parser.add_argument("--rounds", type=int, default=20, help="interleaved rounds")
    parser.add_argument(
        "--database-url",
        default=os.getenv("BENCH_TRACES_DATABASE_URL", "postgres:///toolops_bench_traces"),
        help="dropped and created afresh",
    )
    o = parser.parse_args(argv)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="toolops-bench-traces-") as tmpdir:
        tmp = Path(tmpdir)
        procs = Processes(tmp)
        try:
            results = measure(o, tmp, procs)
        except BenchError as exc:
            procs.stop_all()
            print(f"\nbench (traces) failed: {exc}", file=sys.stderr)
            print(procs.error_logs(), file=sys.stderr)
            return 1
        except KeyboardInterrupt:
            return 130
        finally:
            procs.stop_all()
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    print(f"(traces: {time.monotonic() - started:.0f} s; {RESULTS.relative_to(ROOT)})")
    return 0


def measure(o: argparse.Namespace, tmp: Path, procs: Processes) -> dict[str, Any]:
    def say(text: str = "") -> None:
        print(text, flush=True)

    downstream, sink, off_port, on_port = free_ports(4)
    (tmp / "catalog.toml").write_text(
        CATALOG.format(url=f"http://{HOST}:{downstream}", schema=PARAMS_SCHEMA)
    )
    env = toolops_env(tmp, o.database_url, tmp / "catalog.toml")
    say("traces: fresh database, migrate, agent …")
    token = agent_database(env)

    procs.start(
        "downstream",
        [PY, str(BENCH / "downstream.py"), "--host", HOST, "--port", str(downstream)],
        env,
    )
    procs.start("sink", [PY, str(BENCH / "otlp_sink.py"), "--port", str(sink)], env)
    exporting = {
        **env,
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://{HOST}:{sink}",
        "OTEL_SERVICE_NAME": "toolops-bench",
    }
    procs.start(
        "toolops-off", uvicorn_argv("toolops.asgi:application", off_port, loop="uvloop"), env
    )
    procs.start(
        "toolops-on", uvicorn_argv("toolops.asgi:application", on_port, loop="uvloop"), exporting
    )
    wait_http(procs, "downstream", downstream, "/")
    wait_http(procs, "sink", sink, "/count")
    for name, port in (("toolops-off", off_port), ("toolops-on", on_port)):
        wait_http(procs, name, port, "/api/v1/schema/?format=json")
    create_runs(off_port, token, toolops_run_ids("off"))
    create_runs(on_port, token, toolops_run_ids("on"))
    off = toolops_targets([off_port], token, "off")["write"]
    on = toolops_targets([on_port], token, "on")["write"]

    say(
        f"traces: export off vs on, {o.calls} write calls each at concurrency 1, "
        f"{o.rounds} interleaved rounds …"
    )
    for target in (off, on):
        drive(target, 1, 300)  # warm-up: pools, caches, the exporter's first batch
    before = sink_count(sink)
    totals = {"off": Sample(), "on": Sample()}
    targets = {"off": off, "on": on}
    pids = {"off": procs.pid("toolops-off"), "on": procs.pid("toolops-on")}
    cpu_s = {"off": 0.0, "on": 0.0}
    round_diffs: list[float] = []
    per_round = max(1, o.calls // o.rounds)
    for r in range(o.rounds):
        # Each round both sides, in alternating order, so that drift hits both alike.
        p50 = {}
        for side in ("off", "on") if r % 2 == 0 else ("on", "off"):
            cpu_before = group_cpu_s([pids[side]]) or 0.0
            sample = drive(targets[side], 1, per_round)
            cpu_s[side] += (group_cpu_s([pids[side]]) or 0.0) - cpu_before
            totals[side].add(sample)
            p50[side] = float(sample.stats()["p50_ms"] or 0.0)
        round_diffs.append(p50["on"] - p50["off"])
    errors = totals["off"].errors + totals["on"].errors
    if errors:
        raise BenchError(f"{len(errors)} failed calls, e.g. {errors[0]}")
    measured = per_round * o.rounds
    deadline = time.monotonic() + 15
    while sink_count(sink) - before < 2 * measured and time.monotonic() < deadline:
        time.sleep(0.2)  # the batch processor's last batch
    exported = sink_count(sink) - before
    stats = {k: v.stats() for k, v in totals.items()}
    cost = stats["on"]["p50_ms"] - stats["off"]["p50_ms"]
    cost_rounds = statistics.median(round_diffs)
    # CPU the serving process spent per call, its exporter's thread included: steadier
    # than latency on a busy or small machine, and what export costs when it is busy.
    cpu_ms = {k: cpu_s[k] * 1000 / measured for k in cpu_s}
    rows = span_rows(env, "on")

    say("traces: the run page of a 1,000-call run …")
    timeline = json.loads(
        run_checked([PY, str(BENCH / "timeline.py"), "--json"], env, "timeline").splitlines()[-1]
    )
    render = float(timeline["page_ms_median"])
    detail = (
        f"{timeline['shown']} of {timeline['calls']} calls on its first page, "
        f"{timeline['queries']} queries, live refresh {timeline['refresh_ms_median']} ms"
    )

    say()
    say("                          p50 ms   p99 ms   calls/s")
    for name in ("off", "on"):
        s = stats[name]
        say(
            f"  write, export {name:4}    {s['p50_ms']:7.3f}  {s['p99_ms']:7.3f}  "
            f"{s['calls_per_s']:8.0f}"
        )
    say()
    ok = "PASS" if cost <= EXPORT_TARGET_MS else "MISS"
    say(
        f"  {ok}  export on costs {cost:+.3f} ms p50 over export off (target ≤ "
        f"{EXPORT_TARGET_MS} ms); median of the {o.rounds} rounds' differences "
        f"{cost_rounds:+.3f} ms"
    )
    say(
        f"        server CPU per call: {cpu_ms['off']:.3f} ms off, {cpu_ms['on']:.3f} ms on "
        f"({cpu_ms['on'] - cpu_ms['off']:+.3f} ms, the exporter's thread included)"
    )
    say(
        f"        span rows per call: {rows['rows_per_call']:.2f} (1 call row + "
        f"{rows['attempt_rows'] / rows['calls']:.2f} attempt rows; no other span table)"
    )
    say(
        f"        spans exported per call: {exported / measured:.2f} "
        f"({exported} for {measured} calls)"
    )
    ok = "PASS" if render < TIMELINE_TARGET_MS else "MISS"
    say(
        f"  {ok}  1,000-call run page renders in {render:.1f} ms (median) on the server "
        f"(target < {TIMELINE_TARGET_MS:g} ms; {detail})"
    )
    return {
        "write_export_off": stats["off"],
        "write_export_on": stats["on"],
        "export_cost_p50_ms": cost,
        "export_target_ms": EXPORT_TARGET_MS,
        "export_cost_round_median_ms": cost_rounds,
        "round_differences_ms": round_diffs,
        "server_cpu_ms_per_call": cpu_ms,
        "span_rows": rows,
        "spans_exported": exported,
        "calls_measured": measured,
        "timeline": timeline,
        "timeline_target_ms": TIMELINE_TARGET_MS,
    }


if __name__ == "__main__":
    sys.exit(main())
