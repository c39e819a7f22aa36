"""bench/flat.py's command line, and the names of its two databases."""

from __future__ import annotations

import argparse
import os

NAMES = {"small": "toolops_bench_flat_small", "big": "toolops_bench_flat_big"}


def parse_options(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="ToolOps benchmark: flat with data.")
    parser.add_argument("--quick", action="store_true", help="fewer writes and rounds")
    parser.add_argument("--reload", action="store_true", help="load the big database again")
    parser.add_argument(
        "--rows",
        type=int,
        default=10_000_000,
        help="idempotency records, calls and attempts in the big database (default 10M)",
    )
    parser.add_argument(
        "--cold",
        action="store_true",
        help="do not read the indexes into the OS page cache before measuring",
    )
    parser.add_argument("--calls", type=int, default=0, help="writes per database and case")
    parser.add_argument("--rounds", type=int, default=0, help="interleaved rounds")
    parser.add_argument(
        "--database-url",
        default=os.getenv("BENCH_FLAT_DATABASE_URL", "postgres:///"),
        help="the server, as a URL; the bench's databases are named "
        f"{NAMES['small']} and {NAMES['big']} (default: $BENCH_FLAT_DATABASE_URL or "
        "postgres:///)",
    )
    o = parser.parse_args(argv)
    if not o.database_url.startswith(("postgres://", "postgresql://")):
        parser.error("the benchmark runs on PostgreSQL: --database-url postgres://…")
    if o.rows < 1000:
        parser.error("--rows: at least 1000")
    return o
