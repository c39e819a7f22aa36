"""What bench/flat.py prints: the databases, the table, the goal met or missed, what
EXPLAIN found, and pg_stat_statements' times when the server loads it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bench.flat_explain import kind_of

Say = Callable[..., None]
Label = Callable[[str], str]

STATEMENTS = {
    "write/lookup": "look-up (no budget)",
    "write/claim": "claim (no budget)",
    "write/record": "record (no budget)",
    "write_budget/lookup": "look-up (budget)",
    "write_budget/claim": "claim (budget)",
    "write_budget/record": "record (budget)",
}


def print_table(results: dict[str, Any], label: Label, say: Say) -> None:
    say()
    say("Flat with data: the ToolOps write (a new call per request) at concurrency 1, one")
    say("ToolOps process per database, interleaved rounds")
    for side, db in results["databases"].items():
        c = db["counts"]
        how = "kept from an earlier load" if db.get("reused") else "loaded now"
        say(
            f"  {label(side):>4}  {db['name']:25} {db['size_bytes'] / 1024**2:>9,.0f} MB  "
            f"{c['toolops_idempotencyrecord']:>11,} records ({c['expired_records']:,} expired),"
            f" {c['toolops_attempt']:,} attempts; {how}"
            + (f", load {db['load_s']:.0f} s" if db.get("load_s") is not None else "")
        )
    warm = results.get("prewarmed_bytes")
    say(
        f"  indexes of the loaded tables read into the OS page cache first: {warm / 1024**3:.1f}"
        " GiB (pg_prewarm)"
        if warm is not None
        else "  indexes not read into the OS page cache first (--cold, or no pg_prewarm)"
    )
    say()
    say(
        f"{'case':20} {'rows':>4} {'n':>6} {'p50 ms':>8} {'p99 ms':>8} {'calls/s':>8}"
        f" {'srv CPU':>8} {'db CPU':>7}"
    )
    say("-" * 75)
    for r in results["rows"]:
        srv, db = (
            f"{r[k]:.3f}" if r[k] is not None else "-" for k in ("server_cpu_ms", "db_cpu_ms")
        )
        say(
            f"{r['label']:20} {label(r['side']):>4} {r['n']:>6} {r['p50_ms']:>8.3f}"
            f" {r['p99_ms']:>8.3f} {r['calls_per_s']:>8.0f} {srv:>8} {db:>7}"
        )
    say("  srv CPU / db CPU: CPU ms per call of the ToolOps process / of its database's")
    say("  PostgreSQL backends")
    before, after = results.get("cpu_busy_before"), results.get("cpu_busy_after")
    if before is not None and after is not None:
        say(
            f"  CPUs busy while the bench is idle: {before:.0%} before, {after:.0%} after the"
            " measuring"
            + ("  (others' work: figures inflated)" if max(before, after) > 0.25 else "")
        )
    say(f"  checkpoints during the measuring: {results.get('checkpoints_during', 0)}")
    say()
    say("Goal (checked here, not by the tests): big p50 ≤ 1.1 × small p50")
    for g in results["goals"]:
        verdict = "met " if g["pass"] else "MISS"
        say(
            f"  {verdict}  {g['text']} (goal ≤ {g['limit']}×); median of the rounds' ratios"
            f" {g['round_median']:.3f}×"
        )
    say(f"  {sum(g['pass'] for g in results['goals'])} of {len(results['goals'])} goals met")


def print_explain(results: dict[str, Any], label: Label, say: Say) -> None:
    found = results.get("explain")
    if not found:
        return
    big, small = found["big"], found["small"]
    n = next(iter(big.values()))["n"]
    say()
    say(
        f"EXPLAIN (ANALYZE, BUFFERS, WAL) of each statement's first run, in {n * 2} writes"
        f" (half with a budget): {label('big')} ({label('small')})"
    )
    say(
        f"{'statement':20} {'exec ms p50':>16} {'blocks read':>14} {'dirtied':>12}"
        f" {'WAL FPI':>12} {'WAL kB':>14}"
    )
    for key, name in STATEMENTS.items():
        b, s = big.get(key), small.get(key)
        if b is None or s is None:
            continue
        say(
            f"{name:20} {pair(b['execution_ms_p50'], s['execution_ms_p50'], 3):>16}"
            f" {pair(b['shared_read_mean'], s['shared_read_mean'], 1):>14}"
            f" {pair(b['shared_dirtied_mean'], s['shared_dirtied_mean'], 1):>12}"
            f" {pair(b['wal_fpi_mean'], s['wal_fpi_mean'], 1):>12}"
            f" {pair(b['wal_bytes_mean'] / 1024, s['wal_bytes_mean'] / 1024, 1):>14}"
        )
    say("  blocks read: shared buffers missed (from the OS cache or disk); dirtied: pages")
    say("  first changed; WAL FPI: full-page images (a page's first change after a checkpoint)")
    say(f"Index use on {label('big')}:")
    for key, name in STATEMENTS.items():
        b = big.get(key)
        if b is None:
            continue
        scans = ", ".join(b["seq_scans"]) or "none"
        say(f"  {name:20} {', '.join(b['indexes']) or '-'}; sequential scans: {scans}")
    loaded = sorted({x for b in big.values() for x in b["seq_scans_of_loaded"]})
    say(
        "  no sequential scan of a loaded table"
        if not loaded
        else f"  SEQUENTIAL SCAN of a loaded table: {', '.join(loaded)}"
    )
    for key in ("write/claim", "write/record"):
        if key in big:
            say(f"Plan of the {STATEMENTS[key]} on {label('big')}:")
            for node in big[key]["nodes"]:
                say("  " + "  " * node["depth"] + describe(node))
    print_statement_times(results.get("statement_times"), label, say)


def pair(big: float, small: float, digits: int) -> str:
    return f"{big:.{digits}f} ({small:.{digits}f})"


def describe(node: dict[str, Any]) -> str:
    text = str(node["node"])
    if node["relation"]:
        text += f" on {node['relation']}"
    if node["index"]:
        text += f" using {node['index']}"
    if node["arbiters"]:
        text += f" (ON CONFLICT arbiter {', '.join(node['arbiters'])})"
    if node["cte"]:
        text += f" [{node['cte']}]"
    return text + f"  rows={node['rows']}"


def statement_times(urls: dict[str, str], *, reset: bool) -> dict[str, Any]:
    """pg_stat_statements' figures of the claim, record and look-up statements on each
    database, when the server loads the module; `reset` clears them for these databases
    only. Never fails the bench: what it cannot do it says."""
    import psycopg

    found: dict[str, Any] = {}
    try:
        for side, url in urls.items():
            with psycopg.connect(url, autocommit=True) as conn:
                libraries = conn.execute("SHOW shared_preload_libraries").fetchone()[0]
                if "pg_stat_statements" not in libraries:
                    return {
                        "available": False,
                        "why": "not in the server's shared_preload_libraries",
                    }
                conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
                dbid = "(SELECT oid FROM pg_database WHERE datname = current_database())"
                if reset:
                    conn.execute(f"SELECT pg_stat_statements_reset(0, {dbid}, 0)")
                    continue
                rows = conn.execute(
                    "SELECT query, calls, mean_exec_time, stddev_exec_time, shared_blks_read, "
                    f"wal_fpi FROM pg_stat_statements WHERE dbid = {dbid} ORDER BY calls DESC"
                ).fetchall()
                found[side] = [
                    {
                        "kind": kind_of(q),
                        "calls": c,
                        "mean_ms": m,
                        "stddev_ms": d,
                        "blocks_read": r,
                        "wal_fpi": w,
                        "query": q[:300],
                    }
                    for q, c, m, d, r, w in rows
                    if kind_of(q) is not None
                ]
    except psycopg.Error as exc:
        return {"available": False, "why": str(exc).strip().splitlines()[0]}
    return {"available": True, **found}


def print_statement_times(times: dict[str, Any] | None, label: Label, say: Say) -> None:
    if not times:
        return
    if not times.get("available"):
        say(f"pg_stat_statements: skipped ({times.get('why')})")
        return
    say("pg_stat_statements, during the measuring (mean ms per execution):")
    for side in ("small", "big"):
        for s in times.get(side, []):
            say(
                f"  {label(side):>4}  {s['kind']:7} {s['calls']:>6} calls  {s['mean_ms']:.3f} ms"
                f"  blocks read {s['blocks_read']}, WAL FPI {s['wal_fpi']}"
            )


def print_console(results: dict[str, Any], label: Label, say: Say) -> None:
    found = results.get("console")
    if not found:
        return
    goal = found["goal_ratio"]
    small, big = found["small"]["pages"], found["big"]["pages"]
    say()
    say(f"The console on {label('big')} and {label('small')} rows: list pages and search,")
    say("rendered in-process (test client, superuser: middleware, view, queries, template)")
    say(
        f"{'page':28} {'p50 ' + label('big'):>9} {'p50 ' + label('small'):>9} {'ratio':>6}"
        f" {'queries':>7} {'SQL ms':>7}  seq scans of loaded tables"
    )
    for g in found["goals"]:
        b, s = big[g["case"]], small[g["case"]]
        scans = ", ".join(b["seq_scans_of_loaded"]) or "none"
        p50 = [f"{x['p50_ms']:.1f}" if x["p50_ms"] is not None else "failed" for x in (b, s)]
        ratio = f"{g['value']:.2f}×" if g["value"] is not None else "-"
        sql = f"{b['sql_ms']:.1f}" if b["sql_ms"] is not None else "-"
        say(
            f"{g['label']:28} {p50[0]:>9} {p50[1]:>9} {ratio:>6} {b['queries']:>7} {sql:>7}"
            f"  {scans}"
        )
    ids = found["big"]["ids"]
    say(
        f"  searched on {label('big')}: run_id {ids['run']}, call_id {ids['call']}, key"
        f" {ids['key'][:16]}…; each search landed on that run's page"
    )
    say("  SQL ms: the page's SELECTs under EXPLAIN ANALYZE, summed (one render)")
    jit = {g["label"]: big[g["case"]].get("jit_ms") or 0.0 for g in found["goals"]}
    if any(jit.values()):
        say(
            f"  of which PostgreSQL's JIT compiling on {label('big')} (jit_above_cost): "
            + ", ".join(f"{k} {v:.0f} ms" for k, v in jit.items() if v)
        )
    key = big.get("search_key")
    if key is not None:
        used = ", ".join(i for i in key["indexes"] if i.startswith(("call_", "toolops_too")))
        say(
            f"  search by idempotency key on {label('big')}: call-table indexes {used or 'none'};"
            + (
                " no scan of the call table"
                if "toolops_toolcall" not in key["seq_scans"]
                else " SCANS THE CALL TABLE"
            )
        )
    say()
    say(
        f"Goal (checked here, not by the tests): big p50 ≤ {goal} × small p50 per page, and"
        " no sequential scan of a loaded table by a search"
    )
    for g in found["goals"]:
        if not g["pass"]:
            why = (f"failed: {g['error']}" if g["error"] else f"{g['value']:.2f}×") + (
                f", scans {', '.join(g['seq_scans_of_loaded'])}" if g["seq_scans_of_loaded"] else ""
            )
            say(f"  MISS  {g['label']}: {why}")
    met = sum(g["pass"] for g in found["goals"])
    say(f"  {met} of {len(found['goals'])} pages met")
