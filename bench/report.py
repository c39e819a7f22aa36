"""The report: the table, the goals met or missed, the SQL statement counts, and
bench/results/latest.json."""

from __future__ import annotations

import argparse
import json
import subprocess
from collections.abc import Callable
from typing import Any

from bench import goals
from bench.cases import TOKENS
from bench.goals import row
from bench.load import CONCURRENCY
from bench.procs import BENCH, ROOT

RESULTS = BENCH / "results" / "latest.json"

Say = Callable[..., None]

LABELS = {
    "direct": "direct downstream",
    "floor": "floor (DRF + 3 writes)",
    "physical": "physical (ASGI + psycopg, 3 trips)",
    "dbos": "DBOS (1-step workflow)",
    "write_budget": "ToolOps write (budget)",
    "write": "ToolOps write (no budget)",
    "read": "ToolOps read",
    "replay": "ToolOps replay",
    "ping": "floor ping (no DB) *",
}

STATEMENTS = {
    "write_budget": "write (budget)",
    "write": "write (no budget)",
    "read": "read",
    "replay": "replay",
    "write_with_tool_call_id": "write with tool_call_id",
    "replay_by_tool_call_id": "replay by tool_call_id",
    "write_with_undo": "write registering an undo",
    "first_call_of_process": "first write of a process",
    "floor": "floor",
    "physical": "physical",
    "dbos_write": "DBOS workflow (new ID)",
    "dbos_replay": "DBOS same workflow ID",
}
DBOS_MODES = {
    "sync": "sync workflows, each request's run whole in one hop onto a thread pool",
    "async": "async workflows on the event loop",
}


def print_report(results: dict[str, Any], options: argparse.Namespace, say: Say) -> None:
    say()
    sent = "{step_index, tool, args" + (", tool_call_id}" if options.tool_call_id else "}")
    mode = results["dbos_mode"]
    say(
        f"ToolOps, floor, physical and DBOS served as {results['serving']['label']}; "
        f"downstream: {results['downstream_probe']['used']}"
    )
    how = "measured cheaper" if options.dbos_mode == "auto" else f"--dbos-mode {mode}"
    say(f"DBOS: {DBOS_MODES[mode]} ({how})")
    say(f"calls send {sent}; budgeted writes also tokens: {TOKENS}")
    say(
        f"{'case':34} {'conc':>4} {'n':>6} {'p50 ms':>8} {'p99 ms':>8} {'p99/50':>6}"
        f" {'calls/s':>8} {'srv CPU':>8} {'db CPU':>7}"
    )
    say("-" * 97)
    for c in CONCURRENCY:
        for case, label in LABELS.items():
            r = row(results, case, c)
            srv, db = fmt_ms(r["server_cpu_ms"]), fmt_ms(r["db_cpu_ms"])
            ratio = r["p99_ms"] / r["p50_ms"] if r["p50_ms"] else 0.0
            say(
                f"{label:34} {c:>4} {r['n']:>6} {r['p50_ms']:>8.2f} {r['p99_ms']:>8.2f}"
                f" {ratio:>6.1f} {r['calls_per_s']:>8.0f} {srv:>8} {db:>7}"
            )
    say("* for reading the floor: Django + DRF alone, no database, same server")
    say("  srv CPU / db CPU: CPU ms per call used by the serving processes / by the")
    say("  PostgreSQL backends of its database (for the ToolOps, physical and DBOS rows srv")
    say("  excludes the downstream's own CPU)")
    clients = results["clients_c1"]
    if clients:
        say(
            "  the downstream through other HTTP clients, conc 1 (direct is http.client): "
            + ", ".join(f"{k} p50 {v['p50_ms']:.2f} ms" for k, v in clients.items())
        )
    runs = results.get("budget_runs")
    if runs:
        say(
            f"  budgeted run {runs['run_id']} after the measurement: {runs['status']},"
            f" {runs['calls']} calls, {runs['usage']['attempts']} attempts and"
            f" {runs['usage']['tokens']} tokens counted"
        )
    before = results.get("machine_before", {}).get("cpu_busy_idle_bench")
    after = results.get("machine_after", {}).get("cpu_busy_idle_bench")
    if after is not None:
        say(
            "  CPUs busy while the bench is idle: "
            + (f"{before:.0%} before, " if before is not None else "")
            + f"{after:.0%} after the measurement"
            + ("  (others' work: figures inflated)" if max(before or 0, after) > 0.25 else "")
        )
    say()
    print_goals(results, say)
    say()
    print_statements(results["statements"], options, say)


def print_goals(results: dict[str, Any], say: Say) -> None:
    say("Goals (checked here, not by the tests). overhead = ToolOps p50 − direct p50")
    checked = goals.check(results)
    results["goals"] = checked
    for g in checked:
        verdict = "met " if g["pass"] else "MISS"
        say(f"  {verdict}  c{g['conc']}  {g['goal']:25} {g['text']}")
    peers = [
        f"{LABELS[case].split(' (')[0]} c{c} {r['p99_ms'] / r['p50_ms']:.1f}×"
        for c in CONCURRENCY
        for case in ("floor", "physical", "dbos")
        if (r := row(results, case, c))["p50_ms"]
    ]
    say(f"  (p99/p50 of the peers, for reading the tails: {', '.join(peers)})")
    say(f"  (ToolOps write (budget) / physical: {goals.physical_ratios(results)})")
    required = [g for g in checked if "stretch" not in g["goal"]]
    stretch = [g for g in checked if "stretch" in g["goal"]]
    say(
        f"  {sum(g['pass'] for g in required)} of {len(required)} goals met;"
        f" stretch {sum(g['pass'] for g in stretch)} of {len(stretch)}"
    )


def print_statements(statements: dict[str, Any], options: argparse.Namespace, say: Say) -> None:
    if "error" in statements:
        say(f"SQL statements per call: the count failed:\n{statements['error'][-2000:]}")
        return
    say("SQL round trips per call, in-process: ToolOps and the floor through Django's")
    say("CaptureQueriesContext; the physical endpoint and DBOS at psycopg, DBOS's pool's")
    say("pre-ping (`;`) included. BEGIN and COMMIT are round trips too; a statement outside")
    say("them commits alone.")
    for name, label in STATEMENTS.items():
        got = statements.get(name)
        if got is None:
            continue
        sql = got["statements"]
        txn = sum(1 for s in sql if s in ("BEGIN", "COMMIT", "ROLLBACK"))
        pings = sum(1 for s in sql if s.strip() == ";")
        extra = f", {pings} pre-ping" if pings else ""
        say(f"  {label:26} {len(sql):>3} round trips ({txn} BEGIN/COMMIT{extra})")
        if options.verbose:
            for i, text in enumerate(sql, 1):
                say(f"      {i:>2}. {shorten(text) if text.strip() != ';' else '; (pre-ping)'}")
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


def dbos_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("dbos")
    except PackageNotFoundError:
        return ""
