"""CPU accounting from /proc: how busy the machine is, and the CPU each case's servers
and the database's backends spend per call."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator, Sequence


def cpu_busy(seconds: float = 1.0) -> float | None:
    """The share of all CPUs busy over `seconds` (Linux /proc/stat), or None."""

    def sample() -> tuple[int, int]:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
        return sum(fields), idle

    try:
        total0, idle0 = sample()
        time.sleep(seconds)
        total1, idle1 = sample()
    except (OSError, ValueError, IndexError):
        return None
    total = total1 - total0
    return None if total <= 0 else 1 - (idle1 - idle0) / total


CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _proc_stat(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()  # fields from the 3rd (state) on
    except (OSError, IndexError):
        return None


def group_cpu_s(leaders: Sequence[int]) -> float | None:
    """CPU seconds (user + system) used so far by the process groups of `leaders` (a
    uvicorn server and its --workers children), from /proc; None where there is none."""
    groups = set(leaders)
    total = 0.0
    try:
        entries = [int(e) for e in os.listdir("/proc") if e.isdigit()]
    except OSError:
        return None
    for pid in entries:
        fields = _proc_stat(pid)
        if fields is not None and int(fields[2]) in groups:
            total += (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
    return total


def backends_cpu_s(dbname: str) -> dict[int, float]:
    """CPU seconds used so far by each PostgreSQL backend serving `dbname`."""
    found: dict[int, float] = {}
    try:
        entries = [int(e) for e in os.listdir("/proc") if e.isdigit()]
    except OSError:
        return found
    marker = f" {dbname} ".encode()
    for pid in entries:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                title = f.read()
        except OSError:
            continue
        if title.startswith(b"postgres:") and marker in title:
            fields = _proc_stat(pid)
            if fields is not None:
                found[pid] = (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
    return found


class CpuMeter:
    """CPU spent by the servers of one case and by the database's backends, per call."""

    def __init__(self, leaders: Sequence[int], dbname: str) -> None:
        self.leaders = list(leaders)
        self.dbname = dbname
        self.server_s = 0.0
        self.db_s = 0.0
        self.calls = 0

    @contextlib.contextmanager
    def measuring(self, calls: int) -> Iterator[None]:
        server0 = group_cpu_s(self.leaders)
        db0 = backends_cpu_s(self.dbname)
        yield
        server1 = group_cpu_s(self.leaders)
        db1 = backends_cpu_s(self.dbname)
        if server0 is not None and server1 is not None:
            self.server_s += server1 - server0
        self.db_s += sum(db1[pid] - db0[pid] for pid in db1.keys() & db0.keys())
        self.calls += calls

    def per_call_ms(self) -> dict[str, float | None]:
        if not self.calls or not os.path.isdir("/proc"):
            return {"server_cpu_ms": None, "db_cpu_ms": None}
        return {
            "server_cpu_ms": self.server_s * 1000 / self.calls,
            "db_cpu_ms": self.db_s * 1000 / self.calls,
        }
