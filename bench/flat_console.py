"""The console's list pages and its search on a loaded database, for bench/flat.py.

Run as a subprocess, its environment naming the database (DATABASE_URL) and the catalog;
prints one JSON object on stdout. Every page is rendered through Django's test client as
a superuser (the whole stack but the socket: middleware, view, queries, template, as
bench/timeline.py renders a run page): twice to warm up, then `--renders` times, timed.
Then once more with each SELECT first run under EXPLAIN (ANALYZE, BUFFERS) in the same
connection: the indexes each page's queries use, and any sequential scan of a loaded
table (the one thing that must not happen: its time grows with the table).

The ids searched for are those of one loaded call in the middle of the table (its run's
run_id, its call_id, its idempotency key), so that small and big databases are asked
the same kind of question; each search must land on that run's page (one run found →
a redirect, API.md).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# First, before this folder: bench/traces.py must not shadow the traces package.
sys.path.insert(0, str(ROOT))

from bench.flat_explain import LOADED, summary  # noqa: E402 - after the path is set

USER = "bench-flat-console"

# (key, label, path): {run}, {call}, {key}, {agent} filled from the loaded call.
PAGES = (
    ("home", "home: what needs attention", "/console/"),
    ("runs", "runs list, first page", "/console/runs/"),
    ("runs_page_20", "runs list, page 20", "/console/runs/?page=20"),
    ("runs_status", "runs list, status=running", "/console/runs/?status=running"),
    ("runs_agent", "runs list, one agent", "/console/runs/?agent={agent}"),
    ("runs_q", "runs list, q=run_id", "/console/runs/?q={run}"),
    ("unknown", "unknown calls list", "/console/unknown/"),
    ("approvals", "approvals queue", "/console/approvals/"),
    ("tickets", "tickets list", "/console/tickets/"),
    ("search_key", "search: idempotency key", "/console/search/?q={key}"),
    ("search_call", "search: call_id", "/console/search/?q={call}"),
    ("search_run", "search: run_id", "/console/search/?q={run}"),
)
SEARCHES = ("search_key", "search_call", "search_run")
GOAL = 1.5  # big p50 ≤ GOAL × small p50, per page


class Explainer:
    """A Django execute wrapper: EXPLAIN (ANALYZE, BUFFERS) of each SELECT (or a plain
    EXPLAIN), then the SELECT as sent."""

    def __init__(self, analyze: bool = True) -> None:
        self.plans: list[tuple[str, dict[str, Any]]] = []
        self.how = "ANALYZE, BUFFERS, FORMAT JSON" if analyze else "FORMAT JSON"

    def __call__(self, execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        if not many and sql.lstrip().upper().startswith("SELECT"):
            raw = context["cursor"].cursor  # psycopg's own: no wrapper runs again
            raw.execute(f"EXPLAIN ({self.how}) " + sql, params, prepare=False)
            self.plans.append((sql, raw.fetchone()[0][0]))
        return execute(sql, params, many, context)


def sample_call() -> dict[str, str]:
    """The ids of a loaded call in the middle of the call table, and its run's."""
    from toolops.models import ToolCall

    ids = ToolCall.objects.order_by("pk").values_list("pk", flat=True)
    lo, hi = ids.first(), ids.last()
    if lo is None or hi is None:
        raise SystemExit("the database has no calls: load it first (bench/flat.py)")
    call = (
        ToolCall.objects.filter(pk__gte=(lo + hi) // 2)
        .exclude(idempotency_key="")
        .select_related("run")
        .order_by("pk")
        .first()
    )
    if call is None:
        raise SystemExit("no loaded call with an idempotency key")
    return {
        "run": call.run.run_id,
        "run_pk": str(call.run.pk),
        "call": call.call_id,
        "key": call.idempotency_key,
        "agent": str(call.run.agent_id),
    }


def console_client() -> Any:
    from django.contrib.auth import get_user_model
    from django.test import Client

    user_model = get_user_model()
    user = user_model.objects.filter(username=USER).first()
    if user is None:
        user = user_model.objects.create_superuser(USER, f"{USER}@example.com", None)
    client = Client(SERVER_NAME="127.0.0.1")
    client.force_login(user)
    return client


def fetch(client: Any, path: str, ids: dict[str, str], key: str) -> int:
    response = client.get(path)
    status = int(response.status_code)
    if key in SEARCHES:
        # One run found → its page, at the call (API.md): the loaded call's run.
        where = response.get("Location", "")
        if status != 302 or f"/console/runs/{ids['run_pk']}/" not in where:
            raise SystemExit(f"{path} did not land on run {ids['run_pk']}: {status} {where}")
    elif status != 200:
        raise SystemExit(f"{path} answered {status}: {response.content[:300]!r}")
    return status


def timed(client: Any, path: str, ids: dict[str, str], key: str, renders: int) -> list[float]:
    for _ in range(2):
        fetch(client, path, ids, key)
    times = []
    for _ in range(renders):
        t0 = time.perf_counter_ns()
        fetch(client, path, ids, key)
        times.append((time.perf_counter_ns() - t0) / 1e6)
    return times


def explained(client: Any, path: str, ids: dict[str, str], key: str, analyze: bool) -> dict:
    """One more render, each SELECT EXPLAINed first (with ANALYZE unless the page failed:
    then the plans of the queries it reached, the failing one among them)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    explainer = Explainer(analyze)
    with (
        CaptureQueriesContext(connection) as queries,
        connection.execute_wrapper(explainer),
        contextlib.suppress(Exception),  # a failure: said by the timed renders
    ):
        fetch(client, path, ids, key)
    raw = explainer.plans
    plans = [summary(plan) for _, plan in raw]
    seq = sorted({r for p in plans for r in p["seq_scans"]})
    slowest = max(explainer.plans, key=lambda p: p[1].get("Execution Time", 0), default=None)
    return {
        "queries": len(queries),  # the EXPLAINs go round Django: not counted
        "indexes": sorted({i for p in plans for i in p["indexes"]}),
        "seq_scans": seq,
        "seq_scans_of_loaded": [r for r in seq if r in LOADED],
        "sql_ms": sum(float(p["execution_ms"] or 0) for p in plans) if analyze else None,
        # PostgreSQL's JIT compiling a query its estimates call costly (jit_above_cost):
        # tens of ms on a query that runs in one.
        "jit_ms": sum(p.get("JIT", {}).get("Timing", {}).get("Total", 0.0) for _, p in raw),
        "slowest_sql": " ".join(slowest[0].split())[:600] if slowest else "",
    }


def measure(renders: int) -> dict[str, Any]:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "toolops.settings")
    importlib.import_module("toolops.asgi")  # as served: django.setup(), the catalog
    from django.db import connection

    ids = sample_call()
    client = console_client()
    found: dict[str, Any] = {}
    for key, label, template in PAGES:
        path = template.format(**ids)
        page: dict[str, Any] = {"label": label, "path": template, "n": renders, "error": ""}
        try:
            times = timed(client, path, ids, key, renders)
            page.update(p50_ms=statistics.median(times), max_ms=max(times))
        except Exception as exc:  # noqa: BLE001 - a page that fails is a finding, said
            page.update(p50_ms=None, max_ms=None, error=str(exc).strip().splitlines()[-1][:300])
            connection.close()  # a statement timed out: its connection is not lent again
        page.update(explained(client, path, ids, key, analyze=not page["error"]))
        if page["error"]:
            connection.close()
        found[key] = page
    return {"ids": ids, "pages": found}


def measure_sides(envs: dict[str, dict[str, str]], renders: int) -> dict[str, Any]:
    """bench/flat.py's side: this module as a subprocess on each database, then the goal
    per page: big p50 ≤ GOAL × small p50, and for a search no sequential scan of a loaded
    table (a list page's are reported: the paginator counts the runs)."""
    from bench.procs import PY, run_checked

    found: dict[str, Any] = {"goal_ratio": GOAL}
    for side, env in envs.items():
        out = run_checked(
            [PY, str(Path(__file__)), "--renders", str(renders)], env, f"console ({side})"
        )
        found[side] = json.loads(out.strip().splitlines()[-1])
    goals = []
    for key, label, _ in PAGES:
        small, big = found["small"]["pages"][key], found["big"]["pages"][key]
        failed = big["error"] or small["error"]
        ratio = None if failed else big["p50_ms"] / small["p50_ms"]
        goals.append(
            {
                "goal": f"console flat ≤ {GOAL}×",
                "case": key,
                "label": label,
                "value": ratio,
                "limit": GOAL,
                "pass": ratio is not None
                and ratio <= GOAL
                and not (key in SEARCHES and big["seq_scans_of_loaded"]),
                "error": failed,
                "seq_scans_of_loaded": big["seq_scans_of_loaded"],
            }
        )
    found["goals"] = goals
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description="Time the console's list pages and search.")
    parser.add_argument("--renders", type=int, default=15, help="timed renders per page")
    options = parser.parse_args()
    json.dump(measure(max(1, options.renders)), sys.stdout)


if __name__ == "__main__":
    main()
