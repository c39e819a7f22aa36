"""The report: the table, the targets with PASS/MISS, the SQL statement counts, and
bench/results/latest.json."""

from __future__ import annotations

import argparse
import json
import subprocess
from collections.abc import Callable
from typing import Any

from bench.load import CONCURRENCY
from bench.procs import BENCH, ROOT

RESULTS = BENCH / "results" / "latest.json"

Say = Callable[..., None]

LABELS = {
    "direct": "direct downstream",
    "floor": "floor (DRF + 3 writes)",
    "read": "ToolOps read",
    "write": "ToolOps write",
    "replay": "ToolOps replay",
    "ping": "floor ping (no DB) *",
}


def row(results: dict[str, Any], case: str, conc: int) -> dict[str, Any]:
    return next(r for r in results["rows"] if r["case"] == case and r["conc"] == conc)


def targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    found = []
    for c in CONCURRENCY:
        direct, floor = row(results, "direct", c), row(results, "floor", c)
        for case in ("write", "read"):
            call = row(results, case, c)
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
            call = row(results, case, c)
            limit = 4 * call["p50_ms"]
            found.append({
                "target": "p99 ≤ 4 × p50", "case": case, "conc": c,
                "value_ms": call["p99_ms"], "limit_ms": limit,
                "pass": call["p99_ms"] <= limit,
                "text": f"{case}: p99 {call['p99_ms']:.2f} ms vs 4 × p50 {call['p50_ms']:.2f}"
                        f" = {limit:.2f} ms ({call['p99_ms'] / call['p50_ms']:.1f}×)",
            })  # fmt: skip
        replay = row(results, "replay", c)
        found.append({
            "target": "replay p50 ≤ floor p50", "case": "replay", "conc": c,
            "value_ms": replay["p50_ms"], "limit_ms": floor["p50_ms"],
            "pass": replay["p50_ms"] <= floor["p50_ms"],
            "text": f"replay: p50 {replay['p50_ms']:.2f} ms vs floor p50"
                    f" {floor['p50_ms']:.2f} ms ({replay['p50_ms'] / floor['p50_ms']:.2f}×)",
        })  # fmt: skip
    return found


def print_report(results: dict[str, Any], options: argparse.Namespace, say: Say) -> None:
    say()
    sent = "{step_index, tool, args" + (", tool_call_id}" if options.tool_call_id else "}")
    say(f"ToolOps and floor served as {results['serving']['label']}; "
             f"downstream: {results['downstream_probe']['used']}")  # fmt: skip
    say(f"calls send {sent}")
    say(
        f"{'case':26} {'conc':>4} {'n':>6} {'p50 ms':>8} {'p99 ms':>8} {'calls/s':>8}"
        f" {'srv CPU':>8} {'db CPU':>7}"
    )
    say("-" * 82)
    for c in CONCURRENCY:
        for case, label in LABELS.items():
            r = row(results, case, c)
            srv, db = fmt_ms(r["server_cpu_ms"]), fmt_ms(r["db_cpu_ms"])
            say(
                f"{label:26} {c:>4} {r['n']:>6} {r['p50_ms']:>8.2f} {r['p99_ms']:>8.2f}"
                f" {r['calls_per_s']:>8.0f} {srv:>8} {db:>7}"
            )
    say("* for reading the floor: Django + DRF alone, no database, same server")
    say("  srv CPU / db CPU: CPU ms per call used by the serving processes / by the")
    say("  PostgreSQL backends (for ToolOps rows srv excludes the downstream's own CPU)")
    clients = results["clients_c1"]
    if clients:
        say(
            "  the downstream through other HTTP clients, conc 1 (direct is http.client): "
            + ", ".join(f"{k} p50 {v['p50_ms']:.2f} ms" for k, v in clients.items())
        )
    after = results.get("machine_after", {}).get("cpu_busy_idle_bench")
    if after is not None:
        say(f"  CPUs busy while the bench is idle, after the measurement: {after:.0%}")
    say()
    say("Targets (checked here, not by the tests)")
    checked = targets(results)
    results["targets"] = checked
    for t in checked:
        verdict = "PASS" if t["pass"] else "MISS"
        say(f"  {verdict}  conc {t['conc']}  {t['target']:24} {t['text']}")
    say()
    statements = results["statements"]
    if "error" in statements:
        say(f"SQL statements per call: the count failed:\n{statements['error'][-2000:]}")
        return
    say("SQL statements per call (in-process, CaptureQueriesContext). BEGIN and COMMIT")
    say("are round trips too and are listed; a statement outside them commits alone.")
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
        say(f"  {label:25} {len(got['statements']):>3} round trips ({txn} BEGIN/COMMIT)")
        if options.verbose:
            for i, sql in enumerate(got["statements"], 1):
                say(f"      {i:>2}. {shorten(sql)}")
    if not options.verbose:
        say("  (--verbose lists the statements)")


def write_results(results: dict[str, Any], run: dict[str, Any], say: Say) -> None:
    results["run"] = run
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    say(f"\nwritten: {RESULTS.relative_to(ROOT)}")


def fmt_ms(value: float | None) -> str:
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
