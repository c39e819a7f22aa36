"""The per-agent rate limit counted without Redis: a per-process allowance, reconciled
with the database every B requests (docs/security.md, "Fairness between agents").

Each web process counts an agent's requests of the current minute itself, and only every
B-th request adds what it counted since its last look (this request included) to the
agent's window row, with one upsert that returns the window's total: what every process
has added so far. A request is refused when the last total seen plus what this process
counted since reaches the limit; the request that makes the upsert is refused when the
total it returns is past the limit. B = max(1, limit // 50): 1 (an upsert per request,
exact across processes) for a limit under 100; 12 for the default 600.

How far past the limit N processes go: by at most (N - 1) * (B - 1) requests in a
minute. Every request that makes an upsert and is let in saw a total within the limit.
After the last of them, its process lets in only what keeps its own sum within the limit,
and every other process at most B - 1 that no upsert has counted yet: its next request
makes one, sees the total past the limit, and from then on it refuses. One process alone
holds the limit exactly, and so do N when B is 1. Nor is a request refused early: a total
passes the limit only once at least `limit` requests have been let in.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from django.db import connection

# Of an agent's limit, the share each process may count before it adds to the database:
# 2% of the limit past it for each process beyond the first, at worst.
SHARE = 50
# Agents counted in one process before the dead minutes are forgotten.
MAX_AGENTS = 10_000

UPSERT = (
    'INSERT INTO toolops_ratewindow (agent_id, "window", count) VALUES (%s, %s, %s) '
    'ON CONFLICT (agent_id, "window") DO UPDATE SET count = toolops_ratewindow.count + '
    "EXCLUDED.count RETURNING count"
)


def batch_for(limit: int) -> int:
    """B: how many requests a process counts by itself before it adds them up."""
    return max(1, limit // SHARE)


@dataclass
class _Minute:
    """One agent's count in this process for one minute window."""

    window: int = -1
    # The window's total in the database, as the last upsert of this process returned it.
    known: int = 0
    # Let in by this process since that upsert, not yet added to the row.
    unflushed: int = 0
    # Web processes serve sync views from a pool of threads; the lock is this agent's
    # alone, and is held across an upsert (one request in B) so that two threads of one
    # process never both count on a stale total.
    lock: threading.Lock = field(default_factory=threading.Lock)


class Allowance:
    """One process's counts, every agent's (one instance per process: `PROCESS`; a test
    makes several to play several processes on one database)."""

    def __init__(self) -> None:
        self._minutes: dict[int, _Minute] = {}
        self._lock = threading.Lock()

    def admit(self, *, agent_id: int, limit: int, window: int) -> bool:
        """Let one request of the agent in (True) or refuse it (False), in the minute
        `window` (epoch seconds // 60); `limit` is at least 1."""
        entry = self._minute_of(agent_id, window)
        with entry.lock:
            if entry.window != window:
                # A new minute: what was not added for the last one is of use to no one.
                entry.window, entry.known, entry.unflushed = window, 0, 0
            if entry.known + entry.unflushed >= limit:
                return False
            if entry.unflushed + 1 < batch_for(limit):
                entry.unflushed += 1
                return True
            # Added even when it is refused, as a request past the limit always was
            # counted: the other processes then see the window full.
            entry.known = _add(agent_id=agent_id, window=window, count=entry.unflushed + 1)
            entry.unflushed = 0
            return entry.known <= limit

    def _minute_of(self, agent_id: int, window: int) -> _Minute:
        entry = self._minutes.get(agent_id)
        if entry is not None:
            return entry
        with self._lock:
            if len(self._minutes) >= MAX_AGENTS:
                for dead in [k for k, v in self._minutes.items() if v.window < window]:
                    del self._minutes[dead]
            return self._minutes.setdefault(agent_id, _Minute())

    def counting(self) -> set[int]:
        """The agents this process holds a count for."""
        return set(self._minutes)

    def forget(self) -> None:
        """Every count dropped (tests: a fresh process)."""
        with self._lock:
            self._minutes.clear()


def _add(*, agent_id: int, window: int, count: int) -> int:
    """`count` requests added to the agent's window row; the window's total."""
    with connection.cursor() as cursor:
        cursor.execute(UPSERT, [agent_id, window, count])
        row = cursor.fetchone()
    assert row is not None  # an upsert with RETURNING returns its row
    return int(row[0])


PROCESS = Allowance()
