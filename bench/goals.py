"""The performance goals, checked against the figures of one run (never by the tests).

Each goal is a ratio to something measured in the same run on the same machine: the
framework floor (bench/floor), the physical endpoint (bench/physical.py: what a budgeted
write must physically do, in three statements through raw psycopg) or the
durable-execution peer (DBOS, bench/dbos_peer.py) — but for the web CPU per write, an
absolute budget in milliseconds (the srv CPU column).

- overhead    = ToolOps write p50 − direct p50: what ToolOps adds to the tool's own time.
              It still holds the client's HTTP round trip to ToolOps, as the floor's p50
              holds the client's round trip to the floor, so it is compared with the floor's
              whole p50 (the floor calls no downstream: there is nothing to take off). DBOS
              calls the same downstream, so its overhead is DBOS p50 − direct p50.

The write goals are checked for the write in runs with a budget (the one that counts:
every real run has one) and for the write in runs without; the p99 goal for every ToolOps
case; the physical goals for the budgeted write.
"""

from __future__ import annotations

from typing import Any

from bench.load import CONCURRENCY

WRITES = {"write_budget": "write (budget)", "write": "write (no budget)"}


def row(results: dict[str, Any], case: str, conc: int) -> dict[str, Any]:
    return next(r for r in results["rows"] if r["case"] == case and r["conc"] == conc)


def _goal(
    goal: str, case: str, conc: int, value: float, limit: float, text: str, *, higher: bool
) -> dict[str, Any]:
    passed = value >= limit if higher else value <= limit
    return {
        "goal": goal,
        "case": case,
        "conc": conc,
        "value": value,
        "limit": limit,
        "pass": passed,
        "text": text,
    }


def check(results: dict[str, Any]) -> list[dict[str, Any]]:
    found = []
    for c in CONCURRENCY:
        for case, label in WRITES.items():
            found += _peer_goals(results, c, case, label)
        found += _replay_read_goals(results, c)
        found += _tail_goals(results, c)
    found += _physical_goals(results)
    return found


def _peer_goals(results: dict[str, Any], c: int, case: str, label: str) -> list[dict[str, Any]]:
    """A write's overhead against the floor and DBOS, and (at the top concurrency) its
    rate against theirs."""
    direct, floor, dbos = (row(results, k, c) for k in ("direct", "floor", "dbos"))
    d50, f50, dbos_over = direct["p50_ms"], floor["p50_ms"], dbos["p50_ms"] - direct["p50_ms"]
    call = row(results, case, c)
    over = call["p50_ms"] - d50
    stricter = over / (f50 - d50)
    found = [
        _goal(
            "overhead ≤ 1.5× floor",
            case,
            c,
            over / f50,
            1.5,
            f"{label}: ({call['p50_ms']:.2f} − direct {d50:.2f}) / floor {f50:.2f}"
            f" = {over / f50:.2f}×  [/ (floor − direct): {stricter:.2f}×]",
            higher=False,
        )
    ]
    for limit, goal in ((1.0, "overhead ≤ 1.0× DBOS"), (0.7, "… stretch ≤ 0.7× DBOS")):
        found.append(
            _goal(
                goal,
                case,
                c,
                over / dbos_over,
                limit,
                f"{label}: {over:.2f} / (DBOS {dbos['p50_ms']:.2f} − direct {d50:.2f})"
                f" = {over / dbos_over:.2f}×",
                higher=False,
            )
        )
    if c == max(CONCURRENCY):
        rate = call["calls_per_s"]
        for limit, peer, other in ((0.8, "floor", floor), (1.0, "DBOS", dbos)):
            ratio = rate / other["calls_per_s"]
            found.append(
                _goal(
                    f"rate ≥ {limit:.1f}× {peer}",
                    case,
                    c,
                    ratio,
                    limit,
                    f"{label}: {rate:.0f}/s vs {peer} {other['calls_per_s']:.0f}/s = {ratio:.2f}×",
                    higher=True,
                )
            )
    return found


def _replay_read_goals(results: dict[str, Any], c: int) -> list[dict[str, Any]]:
    d50, f50 = row(results, "direct", c)["p50_ms"], row(results, "floor", c)["p50_ms"]
    replay, read = row(results, "replay", c), row(results, "read", c)
    over = read["p50_ms"] - d50
    return [
        _goal(
            "replay ≤ 1.0× floor",
            "replay",
            c,
            replay["p50_ms"] / f50,
            1.0,
            f"replay: p50 {replay['p50_ms']:.2f} / floor {f50:.2f} = {replay['p50_ms'] / f50:.2f}×",
            higher=False,
        ),
        _goal(
            "read ≤ 1.3× floor",
            "read",
            c,
            over / f50,
            1.3,
            f"read: ({read['p50_ms']:.2f} − direct {d50:.2f}) / floor {f50:.2f}"
            f" = {over / f50:.2f}×",
            higher=False,
        ),
    ]


def _tail_goals(results: dict[str, Any], c: int) -> list[dict[str, Any]]:
    found = []
    for case in ("write_budget", "write", "read", "replay"):
        call = row(results, case, c)
        ratio = call["p99_ms"] / call["p50_ms"]
        found.append(
            _goal(
                "p99 ≤ 4× p50",
                case,
                c,
                ratio,
                4.0,
                f"{WRITES.get(case, case)}: p99 {call['p99_ms']:.2f} / p50"
                f" {call['p50_ms']:.2f} = {ratio:.1f}×",
                higher=False,
            )
        )
    return found


def _physical_goals(results: dict[str, Any]) -> list[dict[str, Any]]:
    """The budgeted write against the physical endpoint (bench/physical.py): p50 at
    c=1, rate at the top concurrency, and the web process's CPU per write (srv CPU) at
    every concurrency, where /proc gave it."""
    lo, hi = min(CONCURRENCY), max(CONCURRENCY)
    write, phys = row(results, "write_budget", lo), row(results, "physical", lo)
    p50 = write["p50_ms"] / phys["p50_ms"]
    found = [
        _goal(
            "p50 ≤ 1.5× physical",
            "write_budget",
            lo,
            p50,
            1.5,
            f"write (budget): p50 {write['p50_ms']:.2f} / physical {phys['p50_ms']:.2f}"
            f" = {p50:.2f}×",
            higher=False,
        )
    ]
    write, phys = row(results, "write_budget", hi), row(results, "physical", hi)
    rate = write["calls_per_s"] / phys["calls_per_s"]
    found.append(
        _goal(
            "rate ≥ 0.7× physical",
            "write_budget",
            hi,
            rate,
            0.7,
            f"write (budget): {write['calls_per_s']:.0f}/s vs physical"
            f" {phys['calls_per_s']:.0f}/s = {rate:.2f}×",
            higher=True,
        )
    )
    for c in CONCURRENCY:
        write, phys = row(results, "write_budget", c), row(results, "physical", c)
        cpu = write["server_cpu_ms"]
        if cpu is None:
            continue
        beside = f" (physical {phys['server_cpu_ms']:.2f} ms)" if phys["server_cpu_ms"] else ""
        found.append(
            _goal(
                "web CPU ≤ 1.5 ms/write",
                "write_budget",
                c,
                cpu,
                1.5,
                f"write (budget): srv CPU {cpu:.2f} ms a write{beside}",
                higher=False,
            )
        )
    return found


def physical_ratios(results: dict[str, Any]) -> str:
    """The budgeted write over the physical endpoint, for every column that has both."""
    parts = []
    for c in CONCURRENCY:
        write, phys = row(results, "write_budget", c), row(results, "physical", c)
        for key, name in (("p50_ms", "p50"), ("calls_per_s", "rate"), ("server_cpu_ms", "srv CPU")):
            if write[key] and phys[key]:
                parts.append(f"{name} c{c} {write[key] / phys[key]:.2f}×")
    return ", ".join(parts)
