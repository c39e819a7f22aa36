"""Count the SQL statements of one call, in-process, with Django's CaptureQueriesContext.

Run by bench/run.py as a subprocess (its environment names the bench database, the
catalog and, for ToolOps, the agent's token); prints one JSON object on stdout:

    {"write": {"status": 200, "replayed": false, "statements": [...]}, "read": …, …}

`dbos` and `physical` count the DBOS peer's (bench/dbos_peer.py) and the physical
endpoint's (bench/physical.py) round trips at psycopg instead: they run no Django.
`collect` runs every count (bench/run.py calls it).

The request goes through the whole Django + DRF stack (Django's test client: the same
middleware, view and executor as under uvicorn, only the ASGI adapter differs).
BEGIN and COMMIT are listed as Django logs them: each is a round trip to the server.
Not seen here: what psycopg's pool does by itself when a connection is handed out or
returned (nothing, with the pool options ToolOps uses: no check, no reset).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.cases import BUDGET, TOKENS, call_body  # noqa: E402 - after the path is set
from bench.procs import BENCH, PY, BenchError, run_checked  # noqa: E402


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


@contextlib.contextmanager
def psycopg_statements() -> Iterator[list[str]]:
    """Every round trip psycopg makes on this thread while inside: each statement, the
    BEGIN psycopg sends before a transaction's first one, COMMIT and ROLLBACK when a
    transaction is open (for code that runs no Django: DBOS, the physical endpoint)."""
    import threading

    import psycopg
    from psycopg.pq import TransactionStatus

    me = threading.get_ident()
    captured: list[str] = []

    def text(query: Any) -> str:
        return query if isinstance(query, str) else repr(query)

    def note_begin(conn: psycopg.Connection[Any]) -> None:
        if not conn.autocommit and conn.info.transaction_status == TransactionStatus.IDLE:
            captured.append("BEGIN")

    execute, executemany = psycopg.Cursor.execute, psycopg.Cursor.executemany
    commit, rollback = psycopg.Connection.commit, psycopg.Connection.rollback

    def counted_execute(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        if threading.get_ident() == me:
            note_begin(self.connection)
            captured.append(text(query))
        return execute(self, query, *args, **kwargs)

    def counted_executemany(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        if threading.get_ident() == me:
            note_begin(self.connection)
            captured.append(text(query) + " (executemany)")
        return executemany(self, query, *args, **kwargs)

    def ends(name: str, method: Any) -> Any:
        def counted(self: Any) -> None:
            if threading.get_ident() == me and (
                self.info.transaction_status != TransactionStatus.IDLE
            ):
                captured.append(name)
            method(self)

        return counted

    psycopg.Cursor.execute = counted_execute  # type: ignore[method-assign]
    psycopg.Cursor.executemany = counted_executemany  # type: ignore[method-assign]
    psycopg.Connection.commit = ends("COMMIT", commit)  # type: ignore[method-assign]
    psycopg.Connection.rollback = ends("ROLLBACK", rollback)  # type: ignore[method-assign]
    try:
        yield captured
    finally:
        psycopg.Cursor.execute = execute  # type: ignore[method-assign]
        psycopg.Cursor.executemany = executemany  # type: ignore[method-assign]
        psycopg.Connection.commit = commit  # type: ignore[method-assign]
        psycopg.Connection.rollback = rollback  # type: ignore[method-assign]


def count_dbos() -> dict[str, Any]:
    """The DBOS peer's statements for one call (a new workflow ID) and for the same call
    again, counted at psycopg on the calling thread: every statement DBOS's SQLAlchemy
    engine executes, BEGIN, COMMIT and ROLLBACK, and the pool's pre-ping. The sync
    workflow runs on the calling thread; the async one runs the same statements from
    worker threads."""
    from bench import dbos_peer

    def capture(workflow_id: str, n: int) -> dict[str, Any]:
        with psycopg_statements() as captured:
            result = dbos_peer.run_call(workflow_id, "bench_write", {"n": n})
        return {"status": 200, "result": result, "statements": captured}

    dbos_peer.launch()
    try:
        capture("bench-sql/0/bench_write", 0)  # warm-up: the pool's connections
        write = capture("bench-sql/1/bench_write", 1)
        replay = capture("bench-sql/1/bench_write", 1)
    finally:
        from dbos import DBOS

        DBOS.destroy()
    return {"dbos_write": write, "dbos_replay": replay}


def count_physical() -> dict[str, Any]:
    """The physical endpoint's statements for one budgeted write, at psycopg, in a run of
    its own (the load's runs keep their keys)."""
    from bench import physical

    physical.create_tables(os.environ["DATABASE_URL"], ["phys-sql"])
    pool = physical.launch()
    try:
        physical.write("phys-sql", call_body(0, "bench_write", 0, tokens=TOKENS))  # warm-up
        with psycopg_statements() as captured:
            answer = physical.write("phys-sql", call_body(1, "bench_write", 1, tokens=TOKENS))
    finally:
        pool.close()
    return {"physical": {"status": 200, "call_status": answer["status"], "statements": captured}}


def collect(env: dict[str, str]) -> dict[str, Any]:
    """The statements of every kind of call, each counted in a subprocess of its own
    (each sets up Django, DBOS or the endpoint its own way); `env` names the bench
    database, the catalog, the downstream and the agent's token (BENCH_TOKEN)."""
    found: dict[str, Any] = {}
    for target in ("toolops", "floor", "physical", "dbos"):
        argv = [PY, str(BENCH / "sqlcount.py"), target]
        found.update(json.loads(run_checked(argv, env, f"sqlcount {target}")))
    expected = {
        "write": False,
        "write_budget": False,
        "read": False,
        "replay": True,
        "write_with_tool_call_id": False,
        "replay_by_tool_call_id": True,
        "write_with_undo": False,
    }
    for name, expect_replayed in expected.items():
        got = found[name]
        if got["status"] != 200 or got["replayed"] is not expect_replayed:
            raise BenchError(f"the {name} call answered {got}")
    for name in ("dbos_write", "dbos_replay"):
        if found[name]["result"] != {"ok": True} or not found[name]["statements"]:
            raise BenchError(f"the DBOS {name} answered {found[name]}")
    if found["physical"]["call_status"] != "succeeded":
        raise BenchError(f"the physical write answered {found['physical']}")
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description="Count the SQL statements of one call.")
    parser.add_argument("target", choices=["toolops", "floor", "physical", "dbos"])
    options = parser.parse_args()
    if options.target == "toolops":
        result = count_toolops(os.environ["BENCH_TOKEN"])
    elif options.target == "dbos":
        result = count_dbos()
    elif options.target == "physical":
        result = count_physical()
    else:
        result = count_floor()
    json.dump(result, sys.stdout)


if __name__ == "__main__":
    main()
