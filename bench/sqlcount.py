"""Count the SQL statements of one call, in-process, with Django's CaptureQueriesContext.

Run by bench/run.py as a subprocess (its environment names the bench database, the
catalog and, for ToolOps, the agent's token); prints one JSON object on stdout:

    {"write": {"status": 200, "replayed": false, "statements": [...]}, "read": …, …}

`dbos` counts the DBOS peer's (bench/dbos_peer.py) round trips at psycopg instead: it
runs no Django.

The request goes through the whole Django + DRF stack (Django's test client: the same
middleware, view and executor as under uvicorn, only the ASGI adapter differs).
BEGIN and COMMIT are listed as Django logs them: each is a round trip to the server.
Not seen here: what psycopg's pool does by itself when a connection is handed out or
returned (nothing, with the pool options ToolOps uses: no check, no reset).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.cases import BUDGET, TOKENS  # noqa: E402 - after the path is set


def _capture(client: Any, path: str, body: dict[str, Any], **extra: Any) -> dict[str, Any]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as ctx:
        response = client.post(path, data=json.dumps(body), content_type="application/json")
    try:
        payload = json.loads(response.content)
    except ValueError:
        payload = {}
    return {
        "status": response.status_code,
        "call_status": payload.get("status"),
        "replayed": payload.get("replayed"),
        "statements": [q["sql"] for q in ctx.captured_queries],
        "db_ms": round(sum(float(q["time"]) for q in ctx.captured_queries) * 1000, 3),
        **extra,
    }


def count_toolops(token: str) -> dict[str, Any]:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "toolops.settings")
    # As served: django.setup(), the builtin tools, the catalog loaded.
    importlib.import_module("toolops.asgi")
    from django.test import Client

    client = Client(SERVER_NAME="127.0.0.1", HTTP_AUTHORIZATION=f"Bearer {token}")
    for run in ({"run_id": "bench-sql"}, {"run_id": "bench-sql-budget", "budget": BUDGET}):
        response = client.post(
            "/api/v1/runs", data=json.dumps(run), content_type="application/json"
        )
        if response.status_code not in (200, 201):
            raise SystemExit(f"cannot create a run: {response.status_code} {response.content!r}")
    path = "/api/v1/runs/bench-sql/calls"
    budget_path = "/api/v1/runs/bench-sql-budget/calls"
    # Warm-up: the first call of a process loads the tool policies (cached 5 s per process).
    warm = _capture(client, path, {"step_index": 0, "tool": "bench_write", "args": {"n": 0}})
    budget_write = {"step_index": 1, "tool": "bench_write", "args": {"n": 1}, "tokens": TOKENS}
    _capture(client, budget_path, {**budget_write, "step_index": 0})  # the run's first call
    write_body = {"step_index": 1, "tool": "bench_write", "args": {"n": 1}}
    with_id = {"step_index": 3, "tool": "bench_write", "args": {"n": 3}, "tool_call_id": "tc-3"}
    return {
        "first_call_of_process": warm,
        "write": _capture(client, path, write_body),
        "read": _capture(client, path, {"step_index": 2, "tool": "bench_read", "args": {"n": 2}}),
        "replay": _capture(client, path, write_body),
        # A write in a run with a budget (attempts, seconds, tokens), reporting its tokens.
        "write_budget": _capture(client, budget_path, budget_write),
        # The same, when the agent sends a tool_call_id (OpenAI-style clients do).
        "write_with_tool_call_id": _capture(client, path, with_id),
        "replay_by_tool_call_id": _capture(client, path, with_id),
        # A compensable write: its undo is registered in the result's statement.
        "write_with_undo": _capture(
            client, path, {"step_index": 4, "tool": "bench_undoable", "args": {"n": 4}}
        ),
    }


def count_floor() -> dict[str, Any]:
    os.environ["DJANGO_SETTINGS_MODULE"] = "bench.floor.settings"
    import django

    django.setup()
    from django.test import Client

    client = Client(SERVER_NAME="127.0.0.1")
    path = "/floor/runs/bench-sql/calls"
    _capture(client, path, {"step_index": 0, "tool": "bench_write", "args": {"n": 0}})
    return {
        "floor": _capture(client, path, {"step_index": 1, "tool": "bench_write", "args": {"n": 1}})
    }


def count_dbos() -> dict[str, Any]:
    """The DBOS peer's statements for one call (a new workflow ID) and for the same call
    again, counted at psycopg on the calling thread: every statement DBOS's SQLAlchemy
    engine executes, the BEGIN psycopg sends before a transaction's first statement,
    COMMIT and ROLLBACK when a transaction is open, and the pool's pre-ping. The sync
    workflow runs on the calling thread; the async one runs the same statements from
    worker threads."""
    import threading

    import psycopg
    from psycopg.pq import TransactionStatus

    from bench import dbos_peer

    me = threading.get_ident()
    captured: list[str] = []
    counting = False

    def mine() -> bool:
        return counting and threading.get_ident() == me

    def text(query: Any) -> str:
        return query if isinstance(query, str) else repr(query)

    def note_begin(conn: psycopg.Connection[Any]) -> None:
        if not conn.autocommit and conn.info.transaction_status == TransactionStatus.IDLE:
            captured.append("BEGIN")

    execute, executemany = psycopg.Cursor.execute, psycopg.Cursor.executemany
    commit, rollback = psycopg.Connection.commit, psycopg.Connection.rollback

    def counted_execute(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        if mine():
            note_begin(self.connection)
            captured.append(text(query))
        return execute(self, query, *args, **kwargs)

    def counted_executemany(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        if mine():
            note_begin(self.connection)
            captured.append(text(query) + " (executemany)")
        return executemany(self, query, *args, **kwargs)

    def ends(name: str, method: Any) -> Any:
        def counted(self: Any) -> None:
            if mine() and self.info.transaction_status != TransactionStatus.IDLE:
                captured.append(name)
            method(self)

        return counted

    psycopg.Cursor.execute = counted_execute  # type: ignore[method-assign]
    psycopg.Cursor.executemany = counted_executemany  # type: ignore[method-assign]
    psycopg.Connection.commit = ends("COMMIT", commit)  # type: ignore[method-assign]
    psycopg.Connection.rollback = ends("ROLLBACK", rollback)  # type: ignore[method-assign]

    def capture(workflow_id: str, n: int) -> dict[str, Any]:
        nonlocal counting
        captured.clear()
        counting = True
        try:
            result = dbos_peer.run_call(workflow_id, "bench_write", {"n": n})
        finally:
            counting = False
        return {"status": 200, "result": result, "statements": list(captured)}

    dbos_peer.launch()
    try:
        capture("bench-sql/0/bench_write", 0)  # warm-up: the pool's connections
        write = capture("bench-sql/1/bench_write", 1)
        replay = capture("bench-sql/1/bench_write", 1)
    finally:
        from dbos import DBOS

        DBOS.destroy()
    return {"dbos_write": write, "dbos_replay": replay}


def main() -> None:
    parser = argparse.ArgumentParser(description="Count the SQL statements of one call.")
    parser.add_argument("target", choices=["toolops", "floor", "dbos"])
    options = parser.parse_args()
    if options.target == "toolops":
        result = count_toolops(os.environ["BENCH_TOKEN"])
    elif options.target == "dbos":
        result = count_dbos()
    else:
        result = count_floor()
    json.dump(result, sys.stdout)


if __name__ == "__main__":
    main()
