"""Count the SQL statements of one call, in-process, with Django's CaptureQueriesContext.

Run by bench/run.py as a subprocess (its environment names the bench database, the
catalog and, for ToolOps, the agent's token); prints one JSON object on stdout:

    {"write": {"status": 200, "replayed": false, "statements": [...]}, "read": …, …}

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
    response = client.post(
        "/api/v1/runs", data=json.dumps({"run_id": "bench-sql"}), content_type="application/json"
    )
    if response.status_code not in (200, 201):
        raise SystemExit(f"cannot create the run: {response.status_code} {response.content!r}")
    path = "/api/v1/runs/bench-sql/calls"
    # Warm-up: the first call of a process loads the tool policies (cached 5 s per process).
    warm = _capture(client, path, {"step_index": 0, "tool": "bench_write", "args": {"n": 0}})
    write_body = {"step_index": 1, "tool": "bench_write", "args": {"n": 1}}
    with_id = {"step_index": 3, "tool": "bench_write", "args": {"n": 3}, "tool_call_id": "tc-3"}
    return {
        "first_call_of_process": warm,
        "write": _capture(client, path, write_body),
        "read": _capture(client, path, {"step_index": 2, "tool": "bench_read", "args": {"n": 2}}),
        "replay": _capture(client, path, write_body),
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
    return {"floor": _capture(client, path, {"step_index": 1, "tool": "bench_write",
                                             "args": {"n": 1}})}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description="Count the SQL statements of one call.")
    parser.add_argument("target", choices=["toolops", "floor"])
    options = parser.parse_args()
    if options.target == "toolops":
        result = count_toolops(os.environ["BENCH_TOKEN"])
    else:
        result = count_floor()
    json.dump(result, sys.stdout)


if __name__ == "__main__":
    main()
