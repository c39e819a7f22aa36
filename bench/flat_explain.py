"""EXPLAIN (ANALYZE, BUFFERS, WAL) of the statements of ToolOps writes, for bench/flat.py.

Run as a subprocess, its environment naming the database (DATABASE_URL), the catalog and
the agent's token (BENCH_TOKEN); prints one JSON object on stdout. It makes `--calls`
writes through Django's test client (the same middleware, view and executor as under
uvicorn), half in a run without a budget and half in a run with one. Each statement a
write sends is first run under EXPLAIN ANALYZE in a transaction rolled back at once, then
for real: so the plan is the statement's own, with the values of that call, and the
figures (time, buffers, WAL) those of its first run, the pages it needs not yet touched
by it. The write itself goes on unchanged.

Statements are told apart by what they write: `claim` (the idempotency record's INSERT …
ON CONFLICT, with the call row), `record` (the record's UPDATE to recorded, with the call's
result and its attempt), `lookup` (the run, the key's claim and call, the breaker).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# First, before this folder: bench/traces.py must not shadow the traces package.
sys.path.insert(0, str(ROOT))

from bench.cases import BUDGET, TOKENS  # noqa: E402 - after the path is set

# The tables the bench fills: a sequential scan of one of them is what must not happen.
LOADED = ("toolops_idempotencyrecord", "toolops_toolcall", "toolops_attempt", "toolops_run")


def kind_of(sql: str) -> str | None:
    text = " ".join(sql.split())
    if "INSERT INTO toolops_idempotencyrecord" in text:
        return "claim"
    if "UPDATE toolops_idempotencyrecord SET state = 'recorded'" in text:
        return "record"
    if text.startswith("SELECT") and "FROM toolops_run r" in text:
        return "lookup"
    return None


def nodes(plan: dict[str, Any], depth: int = 0) -> list[dict[str, Any]]:
    """The plan's nodes, depth first, each with what it reads and through which index."""
    found = [
        {
            "depth": depth,
            "node": plan.get("Node Type"),
            "relation": plan.get("Relation Name"),
            "index": plan.get("Index Name"),
            "arbiters": plan.get("Conflict Arbiter Indexes"),
            "cte": plan.get("CTE Name") or plan.get("Subplan Name"),
            "rows": plan.get("Actual Rows"),
        }
    ]
    for child in plan.get("Plans", []):
        found += nodes(child, depth + 1)
    return found


def summary(plan: dict[str, Any]) -> dict[str, Any]:
    top = plan["Plan"]
    listed = nodes(top)
    return {
        "execution_ms": plan.get("Execution Time"),
        "planning_ms": plan.get("Planning Time"),
        "shared_hit": top.get("Shared Hit Blocks", 0),
        "shared_read": top.get("Shared Read Blocks", 0),
        "shared_dirtied": top.get("Shared Dirtied Blocks", 0),
        "shared_written": top.get("Shared Written Blocks", 0),
        "wal_records": top.get("WAL Records", 0),
        "wal_fpi": top.get("WAL FPI", 0),
        "wal_bytes": top.get("WAL Bytes", 0),
        "indexes": sorted(
            {n["index"] for n in listed if n["index"]}
            | {a for n in listed for a in (n["arbiters"] or [])}
        ),
        "seq_scans": sorted({n["relation"] for n in listed if n["node"] == "Seq Scan"}),
        "nodes": listed,
    }


class Explainer:
    """A Django execute wrapper: EXPLAIN ANALYZE each write statement in a transaction
    rolled back, then run it as sent."""

    def __init__(self) -> None:
        self.plans: list[tuple[str, str, dict[str, Any]]] = []
        self.case = ""

    def __call__(self, execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        kind = None if many else kind_of(sql)
        if kind is not None:
            raw = context["cursor"].cursor  # psycopg's own: no wrapper runs again
            idle = raw.connection.info.transaction_status == 0  # psycopg.pq.TransactionStatus
            raw.execute("BEGIN" if idle else "SAVEPOINT bench_flat_explain")
            try:
                raw.execute(
                    "EXPLAIN (ANALYZE, BUFFERS, WAL, FORMAT JSON) " + sql, params, prepare=False
                )
                plan = raw.fetchone()[0][0]
            finally:
                raw.execute("ROLLBACK" if idle else "ROLLBACK TO SAVEPOINT bench_flat_explain")
            self.plans.append((self.case, kind, plan))
        return execute(sql, params, many, context)


def explain(token: str, calls: int, prefix: str) -> dict[str, Any]:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "toolops.settings")
    importlib.import_module("toolops.asgi")  # as served: django.setup(), the catalog
    from django.db import connection
    from django.test import Client

    client = Client(SERVER_NAME="127.0.0.1", HTTP_AUTHORIZATION=f"Bearer {token}")
    runs = {
        "write": {"run_id": f"{prefix}-x"},
        "write_budget": {"run_id": f"{prefix}-xb", "budget": BUDGET},
    }
    for run in runs.values():
        response = client.post(
            "/api/v1/runs", data=json.dumps(run), content_type="application/json"
        )
        if response.status_code not in (200, 201):
            raise SystemExit(f"cannot create a run: {response.status_code} {response.content!r}")
    explainer = Explainer()
    for step in range(calls):
        case = "write" if step % 2 == 0 else "write_budget"
        body: dict[str, Any] = {"step_index": step, "tool": "bench_write", "args": {"n": step}}
        if case == "write_budget":
            body["tokens"] = TOKENS
        explainer.case = case
        with connection.execute_wrapper(explainer):
            response = client.post(
                f"/api/v1/runs/{runs[case]['run_id']}/calls",
                data=json.dumps(body),
                content_type="application/json",
            )
        answer = json.loads(response.content)
        if response.status_code != 200 or answer.get("status") != "succeeded":
            raise SystemExit(f"the write answered {response.status_code} {answer}")
    found: dict[str, Any] = {}
    for case, kind, plan in explainer.plans:
        found.setdefault(f"{case}/{kind}", []).append(summary(plan))
    return {name: aggregate(items) for name, items in found.items()}


def aggregate(items: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians of the times, means of the buffers and WAL, every index and sequential scan
    seen, and the first plan's nodes."""

    def mean(key: str) -> float:
        return statistics.fmean(float(i[key]) for i in items)

    return {
        "n": len(items),
        "execution_ms_p50": statistics.median(i["execution_ms"] for i in items),
        "execution_ms_max": max(i["execution_ms"] for i in items),
        "planning_ms_p50": statistics.median(i["planning_ms"] for i in items),
        **{
            f"{k}_mean": mean(k)
            for k in (
                "shared_hit",
                "shared_read",
                "shared_dirtied",
                "shared_written",
                "wal_records",
                "wal_fpi",
                "wal_bytes",
            )
        },
        "indexes": sorted({x for i in items for x in i["indexes"]}),
        "seq_scans": sorted({x for i in items for x in i["seq_scans"]}),
        "seq_scans_of_loaded": sorted({x for i in items for x in i["seq_scans"] if x in LOADED}),
        "nodes": items[0]["nodes"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description="EXPLAIN the statements of ToolOps writes.")
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--prefix", required=True, help="run ids start with it")
    options = parser.parse_args()
    json.dump(explain(os.environ["BENCH_TOKEN"], options.calls, options.prefix), sys.stdout)


if __name__ == "__main__":
    main()
