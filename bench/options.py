"""The benchmark's command line (bench/run.py)."""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence

from bench.procs import Serving


def parse_serving(text: str, n: int, loop: str) -> Serving:
    if text not in ("single", "workers", "procs"):
        raise argparse.ArgumentTypeError("--serve is single, workers or procs")
    return Serving(text, 1 if text == "single" else n, loop)


def parse_options(argv: Sequence[str] | None = None) -> tuple[argparse.Namespace, Serving]:
    parser = argparse.ArgumentParser(
        description="ToolOps benchmark: executor overhead vs the framework floor and the "
        "durable-execution peer (DBOS Transact).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--verbose", "-v", action="store_true", help="list the SQL statements")
    parser.add_argument("--quick", action="store_true", help="about 2 s per case instead of 6")
    parser.add_argument(
        "--seconds", type=float, default=0, help="measuring time per case and concurrency"
    )
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    parser.add_argument(
        "--serve",
        default="procs",
        choices=["single", "workers", "procs"],
        help="how uvicorn serves ToolOps, the floor and DBOS (default: procs, one port each)",
    )
    parser.add_argument(
        "--procs",
        type=int,
        default=os.cpu_count() or 2,
        help="N for --workers N or N processes (default: the number of CPUs)",
    )
    parser.add_argument("--loop", default="uvloop", choices=["uvloop", "asyncio"])
    parser.add_argument(
        "--downstream",
        default="auto",
        choices=["auto", "stdlib", "asgi"],
        help="the no-op downstream (default: the faster one, measured)",
    )
    parser.add_argument(
        "--dbos-mode",
        default="sync",
        choices=["sync", "async", "auto"],
        help="DBOS workflows: sync ones in a worker thread (default) or async ones on the "
        "event loop; auto: measure both and keep the one using less CPU per call",
    )
    parser.add_argument("--no-probe", action="store_true", help="skip the serving comparison")
    parser.add_argument(
        "--wait-quiet",
        type=float,
        default=0,
        metavar="SECONDS",
        help="on a shared machine: first wait up to SECONDS for the CPUs to be idle",
    )
    parser.add_argument(
        "--tool-call-id",
        action="store_true",
        help="send a tool_call_id with every call (the replay is then found by it)",
    )
    parser.add_argument(
        "--study",
        action="store_true",
        help="more serving modes, and what-ifs (lean middleware, prepared statements, WSGI)",
    )
    parser.add_argument(
        "--database-url",
        default=os.getenv("BENCH_DATABASE_URL", "postgres:///toolops_bench"),
        help="dropped and created afresh (default: $BENCH_DATABASE_URL or "
        "postgres:///toolops_bench)",
    )
    parser.add_argument(
        "--dbos-database-url",
        default=os.getenv("BENCH_DBOS_DATABASE_URL", "postgres:///toolops_bench_dbos"),
        help="DBOS's system database, dropped and created afresh (default: "
        "$BENCH_DBOS_DATABASE_URL or postgres:///toolops_bench_dbos)",
    )
    options = parser.parse_args(argv)
    for name in ("database_url", "dbos_database_url"):
        if not getattr(options, name).startswith(("postgres://", "postgresql://")):
            parser.error(f"the benchmark runs on PostgreSQL: --{name.replace('_', '-')} …")
    if options.database_url == options.dbos_database_url:
        parser.error("--dbos-database-url must name a database of its own")
    return options, parse_serving(options.serve, options.procs, options.loop)
