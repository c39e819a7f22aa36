"""What bench/scale.py measures beside the latencies, all from /proc and PostgreSQL's own
views, never guessed: where the machine's CPU went during a row (the web processes, the
database's backends, the load generator, the downstream, everything else), what the
database's backends were waiting on (pg_stat_activity sampled), and each web process's
resident memory (VmRSS)."""

from __future__ import annotations

import resource
import threading
from collections import Counter
from collections.abc import Sequence
from typing import Any

from bench.cpu import CLOCK_TICKS, backends_cpu_s, group_cpu_s


def vm_rss_kb(pid: int) -> int | None:
    """The resident set of one process (VmRSS in /proc/PID/status), kB; None if gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def _machine_ticks() -> tuple[int, int] | None:
    """(busy, total) jiffies of all CPUs so far, from /proc/stat."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return sum(fields) - idle, sum(fields)


def _self_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class CpuSplit:
    """Where all the machine's CPU time went while a row ran: the web processes, the
    PostgreSQL backends of the bench's database, this process (the load generator), the
    downstream, and the rest (PostgreSQL's WAL writer and checkpointer, and whatever
    else runs on the machine: other people's work on a shared one). Shares of the whole
    machine's capacity (all CPUs × the wall time), accumulated over the rounds."""

    PARTS = ("web", "postgres", "loadgen", "downstream", "other")

    def __init__(self, web: Sequence[int], downstream: int, dbname: str) -> None:
        self.web, self.downstream, self.dbname = list(web), downstream, dbname
        self.seconds: Counter[str] = Counter()
        self.capacity_s = 0.0
        self.busy_s = 0.0
        self._start: dict[str, Any] = {}

    def _read(self) -> dict[str, Any]:
        return {
            "web": group_cpu_s(self.web) or 0.0,
            "postgres": backends_cpu_s(self.dbname),
            "loadgen": _self_cpu_s(),
            "downstream": group_cpu_s([self.downstream]) or 0.0,
            "machine": _machine_ticks(),
        }

    def start(self) -> None:
        self._start = self._read()

    def stop(self) -> None:
        a, b = self._start, self._read()
        if a["machine"] is None or b["machine"] is None:
            return
        busy = (b["machine"][0] - a["machine"][0]) / CLOCK_TICKS
        self.capacity_s += (b["machine"][1] - a["machine"][1]) / CLOCK_TICKS
        self.busy_s += busy
        pg = sum(b["postgres"][p] - a["postgres"][p] for p in b["postgres"].keys() & a["postgres"])
        parts = {
            "web": b["web"] - a["web"],
            "postgres": pg,
            "loadgen": b["loadgen"] - a["loadgen"],
            "downstream": b["downstream"] - a["downstream"],
        }
        parts["other"] = max(0.0, busy - sum(parts.values()))
        self.seconds.update(parts)

    def shares(self) -> dict[str, float | None]:
        """Each part's share of the machine, and `busy`: all of them together."""
        if not self.capacity_s:
            return {"busy": None, **dict.fromkeys(self.PARTS)}
        found: dict[str, float | None] = {"busy": self.busy_s / self.capacity_s}
        found.update({p: self.seconds[p] / self.capacity_s for p in self.PARTS})
        return found


# What a backend of the bench's database is doing: running (no wait event), or waiting on
# a heavyweight lock (a row or a transaction: "Lock"), a light-weight lock (a buffer, the
# WAL insert or write: "LWLock"), I/O (the commit's WAL flush among them: "IO"); or idle
# inside a transaction ("InTxn": ToolOps working between two statements of one).
WAITS_SQL = """
SELECT CASE WHEN state = 'active' THEN coalesce(wait_event_type, 'CPU') ELSE 'InTxn' END,
       CASE WHEN state = 'active' THEN coalesce(wait_event, '') ELSE '' END, count(*)
FROM pg_stat_activity
WHERE datname = %s AND state IN ('active', 'idle in transaction') AND pid <> pg_backend_pid()
GROUP BY 1, 2
"""


class WaitSampler:
    """pg_stat_activity sampled every `every` seconds while a row runs, in a thread of its
    own connection: how many of the database's backends were active at once, and what
    each active one was waiting on. Cheap (one small query per sample)."""

    def __init__(self, url: str, dbname: str, every: float = 0.05) -> None:
        self.url, self.dbname, self.every = url, dbname, every
        self.kinds: Counter[str] = Counter()
        self.events: Counter[str] = Counter()
        self.samples = 0
        self.max_active = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.error = ""

    def _run(self) -> None:
        import psycopg

        try:
            with psycopg.connect(self.url, autocommit=True) as conn:
                while not self._stop.wait(self.every):
                    rows = conn.execute(WAITS_SQL, [self.dbname]).fetchall()
                    self.samples += 1
                    self.max_active = max(self.max_active, sum(n for _, _, n in rows))
                    for kind, event, n in rows:
                        self.kinds[kind] += n
                        if kind not in ("CPU", "InTxn"):
                            self.events[f"{kind}:{event}"] += n
        except psycopg.Error as exc:
            self.error = str(exc).strip().splitlines()[0]

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def summary(self) -> dict[str, Any]:
        """Per sample: active backends on average and at most; of the active backends'
        samples, the share running and the share waiting by kind; the top wait events."""
        active = sum(self.kinds.values())
        return {
            "samples": self.samples,
            "active_mean": active / self.samples if self.samples else None,
            "active_max": self.max_active,
            "shares": {k: n / active for k, n in self.kinds.most_common()} if active else {},
            "top_events": {e: n / active for e, n in self.events.most_common(5)} if active else {},
            "error": self.error,
        }


def pool_backends(url: str, dbname: str) -> int:
    """Connections open to the database now (all of the web processes' pools)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
            [dbname],
        ).fetchone()
    return int(row[0]) if row else 0
