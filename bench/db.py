"""The bench databases: dropped and created afresh, and what a round trip and a commit
cost on this machine."""

from __future__ import annotations

import time
from collections.abc import Callable

from bench.load import Sample
from bench.procs import BenchError


def database_name(url: str) -> str:
    from psycopg.conninfo import conninfo_to_dict

    name = conninfo_to_dict(url).get("dbname")
    if not name:
        raise BenchError(f"the bench database URL names no database: {url}")
    return str(name)


def fresh_database(url: str) -> None:
    import psycopg
    from psycopg.conninfo import make_conninfo

    name = database_name(url)
    admin = make_conninfo(url, dbname="postgres")
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def calibrate_database(url: str) -> dict[str, dict[str, float]]:
    """What one round trip and one commit cost on this machine, straight through psycopg."""
    import psycopg

    def timed(fn: Callable[[], object], count: int) -> dict[str, float]:
        sample = Sample()
        for _ in range(count):
            t0 = time.perf_counter_ns()
            fn()
            sample.latencies_ns.append(time.perf_counter_ns() - t0)
        sample.elapsed_s = sum(sample.latencies_ns) / 1e9
        stats = sample.stats()
        return {"p50_ms": stats["p50_ms"], "p99_ms": stats["p99_ms"]}

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE bench_calibration (id bigserial PRIMARY KEY, v text)")

        def commit() -> None:
            with conn.transaction():
                conn.execute("INSERT INTO bench_calibration (v) VALUES ('x')")

        try:
            for _ in range(50):
                conn.execute("SELECT 1").fetchone()
            return {
                "select_1": timed(lambda: conn.execute("SELECT 1").fetchone(), 1000),
                "begin_insert_commit": timed(commit, 400),
            }
        finally:
            conn.execute("DROP TABLE bench_calibration")
