"""The scale run's figures: latency per kind of operation from the history, throughput,
and each process's memory (from /proc)."""

from __future__ import annotations

import os
from collections import defaultdict
from pathlib import Path
from typing import Any

from tests.chaos.history import FAIL, INVOKE, OK, History, Op

FINAL = {"succeeded", "degraded", "failed", "unknown", "skipped", "rejected"}


def kind_of(invoke: Op, done: Op) -> str | None:
    """What an operation was, for its latency: None when its time says nothing (a lost
    answer is the client's own timeout)."""
    value = done.value if isinstance(done.value, dict) else {}
    if value.get("lost"):
        return None
    if invoke.f == "call":
        if invoke.process.startswith("breaker"):
            return "breaker call"
        return "replay" if value.get("replayed") else "write"
    if invoke.f == "read":
        return "long-poll read"
    if invoke.f in ("page", "decide"):
        return "review " + invoke.f
    if invoke.f in ("mcp-init", "mcp-call"):
        return invoke.f.replace("-", " ")
    return invoke.f  # run, complete, abort


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def latencies(history: History) -> dict[str, list[float]]:
    """Seconds per operation, by kind; and "approval wait": from a call answered
    pending_approval to its first decided answer."""
    invokes: dict[int, Op] = {}
    found: dict[str, list[float]] = defaultdict(list)
    pending: dict[str, float] = {}
    for op in history.ops:
        if op.type == INVOKE:
            invokes[op.op_id] = op
            continue
        invoke = invokes.get(op.op_id)
        if invoke is None or op.type not in (OK, FAIL):
            continue
        kind = kind_of(invoke, op)
        if kind is not None:
            found[kind].append(op.time - invoke.time)
        status = op.value.get("status") if isinstance(op.value, dict) else None
        if op.type == OK and invoke.f in ("call", "read"):
            if status == "pending_approval":
                pending.setdefault(op.key, op.time)
            elif status in FINAL and op.key in pending:
                found["approval wait"].append(op.time - pending.pop(op.key))
    return dict(found)


def latency_table(history: History) -> dict[str, dict[str, float]]:
    return {
        kind: {
            "n": len(values),
            "p50_ms": round(percentile(values, 50) * 1000, 1),
            "p99_ms": round(percentile(values, 99) * 1000, 1),
        }
        for kind, values in sorted(latencies(history).items())
    }


def answered_calls(history: History, start: float, end: float) -> int:
    """Tool calls answered (API writes and replays, breaker calls, MCP tools/call) whose
    answer came within the load window."""
    invokes = {o.op_id: o for o in history.ops if o.type == INVOKE}
    return sum(
        1
        for o in history.ops
        if o.type in (OK, FAIL)
        and invokes[o.op_id].f in ("call", "mcp-call")
        and start <= o.time <= end
    )


def _status(pid: int) -> dict[str, str]:
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return {}
    return dict(line.split(":", 1) for line in text.splitlines() if ":" in line)


def _kb(status: dict[str, str], field: str) -> int:
    return int(status.get(field, "0 kB").split()[0])


def descendants(pid: int) -> list[int]:
    """`pid`'s children, their children, …, from /proc (any process of its group)."""
    parents: dict[int, list[int]] = defaultdict(list)
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            ppid = _status(int(entry)).get("PPid", "").strip()
            if ppid.isdigit():
                parents[int(ppid)].append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def memory(pids: dict[str, int | None], alone: int | None = None) -> dict[str, dict[str, float]]:
    """Each named process's resident memory now and at its peak (MiB), its children's
    added (uvicorn's, celery's: none with these pools, but counted if any) — except for
    the process `alone` (the runner: its children are the others)."""
    found = {}
    for name, pid in pids.items():
        if pid is None:
            continue
        group = [pid] if pid == alone else [pid, *descendants(pid)]
        statuses = [_status(p) for p in group]
        found[name] = {
            "rss_mib": round(sum(_kb(s, "VmRSS") for s in statuses) / 1024, 1),
            "peak_mib": round(sum(_kb(s, "VmHWM") for s in statuses) / 1024, 1),
            "processes": sum(1 for s in statuses if s),
        }
    return found


def table(rows: dict[str, dict[str, Any]], columns: list[str]) -> str:
    width = max([len(k) for k in rows] + [4])
    lines = [f"  {'':<{width}}  " + "  ".join(f"{c:>9}" for c in columns)]
    for name, row in rows.items():
        lines.append(f"  {name:<{width}}  " + "  ".join(f"{row[c]:>9}" for c in columns))
    return "\n".join(lines)
