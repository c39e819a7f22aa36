"""uvicorn run in this process, with cProfile on every thread while the bench says so —
the web process of `bench/profile.py`.

    python bench/profiled.py toolops.asgi:application --port 8000 …   # uvicorn's arguments

Run by path, not with `-m`, so that the source tree on PYTHONPATH (this checkout, or the
one `bench/profile.py --src` names) is the one imported, not the current directory.

Environment:
- `BENCH_PROFILE_DIR`: where the results go; without it, plain uvicorn.
- `BENCH_PROFILE_CPROFILE=1`: profile (else only the wall-clock counters below run, so
  the unprofiled phase is served by the very same code).
- `BENCH_PROFILE_SRC`: the source tree `toolops` must be imported from (checked first).

Signals: SIGUSR1 starts a measurement (the profiles are cleared, the counters zeroed),
SIGUSR2 ends it (a snapshot is kept); each is acknowledged by a file `started`/`stopped`
in BENCH_PROFILE_DIR. At shutdown the snapshot is written: `web.prof` (pstats, every
thread's profile merged) and `process.json` (the wall-clock time spent in psycopg's
`Cursor.execute` and urllib3's `PoolManager.urlopen`, waiting included; the number of
threads profiled; what profiling one call costs here, `calibrate`).

cProfile in Python 3.11 profiles the thread that enables it only: every thread started
here gets a profiler of its own (threading.setprofile), the main one before uvicorn runs.
The timer is each thread's CPU time (time.thread_time_ns), so that time spent waiting —
for PostgreSQL, the downstream, the next request — counts nowhere: self times sum to CPU.
Reading that clock is a system call (~0.7 µs here, against ~0.03 µs for a bare Python
call), so profiling inflates each function by its calls: `calibrate` measures by how
much, before uvicorn starts.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
# Run by path, this folder is sys.path[0]: bench/profile.py would shadow the standard
# library's `profile` (which cProfile imports) and bench/traces.py the traces app.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]

import cProfile  # noqa: E402
import json  # noqa: E402
import pstats  # noqa: E402
import signal  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

OUT = Path(os.environ["BENCH_PROFILE_DIR"]) if os.environ.get("BENCH_PROFILE_DIR") else None
PROFILING = OUT is not None and os.environ.get("BENCH_PROFILE_CPROFILE") == "1"


class _Snapshot:
    """What pstats.Stats loads: a profile's stats, taken without disabling it (a
    profiler can be disabled only from its own thread)."""

    def __init__(self, stats: dict[Any, Any]) -> None:
        self.stats = stats

    def create_stats(self) -> None:
        pass


class Recorder:
    """Every thread's profiler, and the wall-clock counters."""

    def __init__(self) -> None:
        self.profiles: list[cProfile.Profile] = []
        self.lock = threading.Lock()
        self.waits = {"psycopg_execute_s": 0.0, "urllib3_urlopen_s": 0.0}
        self.counting = False
        self.snapshot: list[dict[Any, Any]] | None = None
        self.frozen_waits: dict[str, float] = {}
        self.overhead: dict[str, float] = {}

    def profile_this_thread(self, *_: Any) -> None:
        """threading.setprofile's hook: the new thread's first event swaps it for a
        profiler of the thread's own."""
        sys.setprofile(None)
        profile = cProfile.Profile(time.thread_time_ns, 1e-9)
        with self.lock:
            self.profiles.append(profile)
        profile.enable()

    def start(self, *_: Any) -> None:
        for profile in list(self.profiles):
            profile.clear()
        self.waits = dict.fromkeys(self.waits, 0.0)
        self.counting = True
        self.snapshot = None
        _mark("started")

    def stop(self, *_: Any) -> None:
        self.counting = False
        self.frozen_waits = dict(self.waits)
        taken = []
        for profile in list(self.profiles):
            profile.snapshot_stats()  # type: ignore[attr-defined]
            taken.append(dict(profile.stats))  # type: ignore[attr-defined]
        self.snapshot = taken
        _mark("stopped")

    def timed(self, name: str, method: Any) -> Any:
        """`method`, its wall-clock time added to the counter `name` while measuring."""
        clock = time.perf_counter

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            t0 = clock()
            try:
                return method(*args, **kwargs)
            finally:
                if self.counting:
                    self.waits[name] += clock() - t0

        return wrapper

    def write(self) -> None:
        assert OUT is not None
        if self.snapshot is None:
            self.stop()
        found = {**self.frozen_waits, "threads_profiled": len(self.profiles)}
        if PROFILING:
            found["overhead"] = self.overhead
        (OUT / "process.json").write_text(json.dumps(found))
        taken = [stats for stats in self.snapshot if stats]  # pstats refuses an empty one
        if PROFILING and taken:
            merged = pstats.Stats(_Snapshot(taken[0]))
            for stats in taken[1:]:
                merged.add(_Snapshot(stats))
            merged.dump_stats(str(OUT / "web.prof"))


def _empty() -> None:
    pass


def calibrate(calls: int = 50_000, rounds: int = 5) -> dict[str, float]:
    """What profiling one call adds, in this process with this timer: to the called
    function's self time (`callee_s`) and to its caller's (`caller_s`, less what the
    loop costs unprofiled). The median of `rounds`; bench/profile.py takes it off."""

    def loop() -> None:
        for _ in range(calls):
            _empty()

    callee, caller = [], []
    for _ in range(rounds):
        t0 = time.thread_time()
        loop()
        bare = time.thread_time() - t0
        profile = cProfile.Profile(time.thread_time_ns, 1e-9)
        profile.enable()
        loop()
        profile.disable()
        profile.snapshot_stats()  # type: ignore[attr-defined]
        stats = profile.stats  # type: ignore[attr-defined]
        own = {name: entry[2] for (_, _, name), entry in stats.items()}
        callee.append(own["_empty"] / calls)
        caller.append(max(0.0, own["loop"] - bare) / calls)
    return {"callee_s": sorted(callee)[rounds // 2], "caller_s": sorted(caller)[rounds // 2]}


def _mark(name: str) -> None:
    assert OUT is not None
    (OUT / name).write_text(str(time.time()))


def _exit(*_: Any) -> None:
    raise SystemExit(0)


def check_source() -> None:
    """`toolops` comes from BENCH_PROFILE_SRC when it is set: a before/after comparison
    that profiled the wrong tree would say nothing."""
    expected = os.environ.get("BENCH_PROFILE_SRC")
    if not expected:
        return
    import toolops

    found = Path(toolops.__file__ or "").resolve()
    if not found.is_relative_to(Path(expected).resolve()):
        sys.exit(f"toolops was imported from {found}, not from {expected}")


def main() -> None:
    import uvicorn

    check_source()
    recorder = Recorder()
    if OUT is not None:
        import psycopg
        import urllib3

        psycopg.Cursor.execute = recorder.timed(  # type: ignore[method-assign]
            "psycopg_execute_s", psycopg.Cursor.execute
        )
        urllib3.PoolManager.urlopen = recorder.timed(  # type: ignore[method-assign]
            "urllib3_urlopen_s", urllib3.PoolManager.urlopen
        )
        signal.signal(signal.SIGUSR1, recorder.start)
        signal.signal(signal.SIGUSR2, recorder.stop)
        # uvicorn hands SIGTERM back to the handler it found once it has shut down, and
        # raises it again: without a handler of ours the process would end before the
        # profile is written.
        signal.signal(signal.SIGTERM, _exit)
    if PROFILING:
        recorder.overhead = calibrate()
        threading.setprofile(recorder.profile_this_thread)
        recorder.profile_this_thread()
    try:
        uvicorn.main.main(args=sys.argv[1:], prog_name="uvicorn", standalone_mode=False)
    finally:
        if PROFILING:
            sys.setprofile(None)
        if OUT is not None:
            recorder.write()


if __name__ == "__main__":
    main()
