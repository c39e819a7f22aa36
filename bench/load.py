"""The load generator: http.client threads in the bench's own process, one keep-alive
connection each, closed loop; and the latency sample it gathers."""

from __future__ import annotations

import http.client
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from bench.procs import HOST, BenchError

CONCURRENCY = (1, 8)


@dataclass
class Target:
    """One kind of request. `body(thread, seq)` makes the body; `seq` is unique per target
    over the whole benchmark, so writes always carry a new idempotency key."""

    name: str
    ports: list[int]
    path: Callable[[int], str]
    body: Callable[[int, int], bytes]
    headers: dict[str, str]
    expect: tuple[bytes, ...] = ()
    seq: int = 0

    def take(self, count: int) -> int:
        start = self.seq
        self.seq += count
        return start


@dataclass
class Sample:
    latencies_ns: list[int] = field(default_factory=list)
    elapsed_s: float = 0.0
    errors: list[str] = field(default_factory=list)

    def add(self, other: Sample) -> None:
        self.latencies_ns += other.latencies_ns
        self.elapsed_s += other.elapsed_s
        self.errors += other.errors

    def stats(self) -> dict[str, float | int | None]:
        ordered = sorted(self.latencies_ns)
        n = len(ordered)
        if not n:
            return {"n": 0, "p50_ms": 0.0, "p99_ms": 0.0, "mean_ms": 0.0, "calls_per_s": 0.0}
        return {
            "n": n,
            "p50_ms": statistics.median(ordered) / 1e6,
            "p99_ms": ordered[min(n - 1, max(0, -(-99 * n // 100) - 1))] / 1e6,
            "mean_ms": statistics.fmean(ordered) / 1e6,
            "calls_per_s": n / self.elapsed_s if self.elapsed_s else 0.0,
        }


def drive(target: Target, concurrency: int, total: int) -> Sample:
    """`total` requests from `concurrency` threads, each with one keep-alive connection
    (http.client: TCP_NODELAY, request line + headers + body in one send), closed loop."""
    per_thread = max(1, total // concurrency)
    first = target.take(per_thread * concurrency)
    latencies: list[list[int]] = [[] for _ in range(concurrency)]
    errors: list[str] = []
    ready = threading.Barrier(concurrency + 1)

    def worker(t: int) -> None:
        conn = http.client.HTTPConnection(HOST, target.ports[t % len(target.ports)], timeout=60)
        out = latencies[t]
        path, headers, expect = target.path(t), target.headers, target.expect
        seqs = range(first + t * per_thread, first + (t + 1) * per_thread)
        bodies = [target.body(t, s) for s in seqs]
        try:
            conn.connect()
        finally:
            ready.wait()
        clock = time.perf_counter_ns
        try:
            for body in bodies:
                t0 = clock()
                conn.request("POST", path, body, headers)
                response = conn.getresponse()
                data = response.read()
                out.append(clock() - t0)
                if response.status != 200 or not all(e in data for e in expect):
                    errors.append(f"{target.name}: HTTP {response.status} {data[:300]!r}")
                    return
        except (OSError, http.client.HTTPException) as exc:
            errors.append(f"{target.name}: {type(exc).__name__}: {exc}")
        finally:
            conn.close()

    threads = [threading.Thread(target=worker, args=(t,), daemon=True) for t in range(concurrency)]
    for thread in threads:
        thread.start()
    ready.wait()
    started = time.perf_counter()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    sample = Sample([x for part in latencies for x in part], elapsed, errors)
    if errors:
        raise BenchError(f"{len(errors)} failed request(s); first: {errors[0]}")
    return sample
