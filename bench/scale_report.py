"""What bench/scale.py prints: the table of 1, 2 and 3 web processes, where the machine's
CPU went, what the database waited on, each process's memory, and what it means."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Say = Callable[..., None]

MEANING = """\
What it means. On {cpus} CPUs a second or third web process adds no CPU: it only shares
the same cores with the first, with PostgreSQL, with the downstream and with the load
generator (this process, on the same machine). More processes help only while a process
leaves the cores idle, waiting on the database or on its own event loop; once the
machine is busy, calls/s stays flat or falls, and latency grows with the queue (the
client threads are {per} per process, so each row asks for more at once). On a machine
with a core or more per web process (and PostgreSQL on its own), the same rows show how
far the processes themselves scale. The CPU per call is the steadiest figure: the web
processes' CPU per call staying flat from row to row says nothing is lost to the
processes sharing work; the share of the machine each part took says which part of the
machine is the limit here."""


def _ms(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def print_scale(results: dict[str, Any], say: Say) -> None:
    rows = results["rows"]
    base = rows[0]["calls_per_s"] or 1.0
    say()
    say(
        f"Scale: the ToolOps write (a new call per request) served by 1 to {len(rows)} web "
        f"processes, {results['per_process']} client threads per process; "
        f"os.cpu_count() = {results['cpus']}"
    )
    say("  load spread by client-side round robin (each client thread one keep-alive")
    say("  connection to one process, threads dealt over the ports in turn; no balancer hop)")
    say(
        f"{'procs':>5} {'conc':>4} {'n':>6} {'calls/s':>8} {'×1 proc':>7} {'p50 ms':>8}"
        f" {'p99 ms':>8} {'srv CPU':>8} {'db CPU':>7} {'busy':>5}"
    )
    say("-" * 74)
    for r in rows:
        say(
            f"{r['procs']:>5} {r['conc']:>4} {r['n']:>6} {r['calls_per_s']:>8.0f}"
            f" {r['calls_per_s'] / base:>6.2f}× {r['p50_ms']:>8.2f} {r['p99_ms']:>8.2f}"
            f" {_ms(r['server_cpu_ms']):>8} {_ms(r['db_cpu_ms']):>7}"
            f" {_pct(r['cpu_split']['busy']):>5}"
        )
    say("  srv CPU / db CPU: CPU ms per call of all the web processes (utime + stime from")
    say("  /proc) / of the database's PostgreSQL backends; busy: all CPUs of the machine")
    say()
    say("Where the machine's CPU went (share of all CPUs × wall time), and what the")
    say("database's active backends were doing (pg_stat_activity, sampled every 50 ms):")
    say(
        f"{'procs':>5} {'web':>5} {'pg':>5} {'loadgen':>7} {'downstr':>7} {'other':>5}"
        f"  {'active':>9}  running / waiting"
    )
    for r in rows:
        s, w = r["cpu_split"], r["waits"]
        active = f"{_ms(w['active_mean'], 1)}/{w['active_max']}"
        shares = ", ".join(f"{k} {v:.0%}" for k, v in w["shares"].items()) or w["error"] or "-"
        say(
            f"{r['procs']:>5} {_pct(s['web']):>5} {_pct(s['postgres']):>5}"
            f" {_pct(s['loadgen']):>7} {_pct(s['downstream']):>7} {_pct(s['other']):>5}"
            f"  {active:>9}  {shares}"
        )
    say("  loadgen: this process, the load generator, on the same CPUs as the servers;")
    say("  other: PostgreSQL's WAL writer and checkpointer and anything else on the machine")
    say("  active: the database's backends in a statement or a transaction, mean/max per")
    say("  sample; CPU = running, IO = waiting on I/O (the commit's WAL flush), Lock = a row or")
    say("  transaction lock, LWLock = a buffer or the WAL insert/write lock, InTxn = idle in a")
    say("  transaction (ToolOps working between two of its statements), Client = waiting for")
    say("  ToolOps' next protocol message, Timeout = a backend sleeping (autovacuum's delay)")
    top = {e: v for r in rows[-1:] for e, v in r["waits"]["top_events"].items()}
    if top:
        say(
            "  top wait events at the most processes: "
            + ", ".join(f"{e} {v:.0%}" for e, v in top.items())
        )
    run = results.get("run", {})
    say(
        f"  pool: up to {run.get('pool_max', 20)} connections and {run.get('api_threads', 20)} API"
        f" threads per process, above the {results['per_process']} requests each gets at once:"
        f" no request waits for a connection ({results.get('pool_backends_after_warmup')}"
        " connections open after the warm-up)"
    )
    before, after = results.get("cpu_busy_before"), results.get("cpu_busy_after")
    if before is not None and after is not None:
        busy = max(before, after) > 0.25
        say(
            f"  CPUs busy while the bench is idle: {before:.0%} before, {after:.0%} after"
            + ("  (others' work: figures inflated)" if busy else "")
        )
    say()
    say("Memory: VmRSS of each web process after the warm-up and once it has served the calls")
    say("counted (no worker is involved: the write runs whole in the web process)")
    for m in results.get("memory", []):
        warm, now = m["rss_warm_kb"], m["rss_kb"]
        growth = f" (+{(now - warm) / 1024:.1f} MB)" if warm and now else ""
        say(
            f"  process {m['process']}: {m['calls']:>7,} calls  "
            f"{(warm or 0) / 1024:>6.1f} MB → {(now or 0) / 1024:>6.1f} MB{growth}"
        )
    say()
    for line in verdicts(results):
        say(line)
    say()
    say(MEANING.format(cpus=results["cpus"], per=results["per_process"]))


def verdicts(results: dict[str, Any]) -> list[str]:
    """What limited the throughput in this run, read off the figures measured."""
    rows = results["rows"]
    found = []
    busy = [r["cpu_split"]["busy"] for r in rows]
    if all(b is not None for b in busy):
        low = min(b for b in busy if b is not None)
        if low >= 0.9:
            other = max(r["cpu_split"]["other"] or 0.0 for r in rows)
            found.append(
                f"Limit: CPU. The machine's CPUs were at least {low:.0%} busy in every row;"
                " the processes share them"
                + (
                    f" (and work outside the bench took up to {other:.0%} of them)."
                    if other > 0.15
                    else "."
                )
            )
        else:
            found.append(
                f"CPUs busy {', '.join(f'{b:.0%}' for b in busy if b is not None)} (1 → "
                f"{len(rows)} processes): below saturation where under 90%."
            )
    locks = max(r["waits"]["shares"].get("Lock", 0.0) for r in rows)
    io = max(r["waits"]["shares"].get("IO", 0.0) for r in rows)
    wal = max(sum(v for e, v in r["waits"]["top_events"].items() if "WAL" in e) for r in rows)
    found.append(
        f"Row and transaction locks: at most {locks:.0%} of the active backends' samples waited"
        f" on one (each client thread writes in a run of its own); on I/O at most {io:.0%};"
        f" on the WAL (its write and flush at commit, I/O or lock) at most {wal:.0%}."
    )
    srv = [r["server_cpu_ms"] for r in rows if r["server_cpu_ms"] is not None]
    if len(srv) > 1:
        found.append(
            f"Web CPU per call {', '.join(f'{v:.2f}' for v in srv)} ms: "
            + (
                "flat within 15%: nothing is lost to the sharing."
                if max(srv) <= 1.15 * min(srv)
                else "it grows with the processes: the sharing costs CPU (context switches,"
                " caches)."
            )
        )
    return found
