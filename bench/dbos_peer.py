"""The durable-execution peer: DBOS Transact behind a bare ASGI app (no framework), for the
benchmark only (the `bench` extra installs it).

`POST /dbos/runs/{run}/calls` with a call's body (`{step_index, tool, args}`, as ToolOps is
sent) starts a DBOS workflow whose ID is `{run}/{step_index}/{tool}` — what names a call
in ToolOps' idempotency key, so a new step is a new workflow and the same one again is
DBOS's own replay — with one step that POSTs `args` to the no-op downstream through a
pooled urllib3 PoolManager (the HTTP client ToolOps uses, with the same pool options) and
answers the step's result as JSON. DBOS records the workflow (its inputs, status and
output) and the step's output in its system database, on the same PostgreSQL server.

Two ways to run the workflow, chosen by `BENCH_DBOS_MODE` (`run.py --dbos-mode`; sync
unless told, the cheaper on a 2-CPU machine; `--dbos-mode auto` measures both in the run):

- `sync`: a sync workflow and step, run whole in one hop onto the event loop's pool of
  threads (`asyncio.to_thread`) — as ToolOps' API runs each request under ASGI;
- `async`: an async workflow awaited on the event loop, its step a sync function run by
  `DBOS.run_step_async` (DBOS moves it, and each of its own database calls, to threads).

Importing `bench.dbos_asgi` launches DBOS in the process; every process gets its own
executor ID, so that one process never recovers another's workflows. The system
database is created and migrated by `python bench/dbos_peer.py --migrate` first.

Environment: `BENCH_DBOS_DATABASE_URL` (the system database), `BENCH_DOWNSTREAM_URL`
(the no-op downstream's base URL), `BENCH_DBOS_MODE` (`sync` or `async`).
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import json
import os
from typing import Any

import urllib3
from dbos import DBOS, DBOSConfig, SetWorkflowID

from bench.asgi_plumbing import post_app

APP_NAME = "toolops-bench-peer"
MODE = os.environ.get("BENCH_DBOS_MODE", "sync")
DOWNSTREAM = os.environ.get("BENCH_DOWNSTREAM_URL", "http://127.0.0.1:9100")
PREFIX = b"/dbos/runs/"
SUFFIX = b"/calls"

# As toolops/tools/http.py: one pool per process, keep-alive, no client-side retries.
_pool = urllib3.PoolManager(num_pools=50, maxsize=32, block=False, retries=False)
_TIMEOUT = urllib3.Timeout(connect=10.0, read=10.0)


def config(*, executor_id: str | None = None) -> DBOSConfig:
    url = os.environ.get("BENCH_DBOS_DATABASE_URL", "postgres:///toolops_bench_dbos")
    cfg: DBOSConfig = {
        "name": APP_NAME,
        "system_database_url": url,
        "log_level": "WARNING",
        # The same version in every process, whatever each one's registry hashes to.
        "application_version": "bench",
    }
    if executor_id:
        cfg["executor_id"] = executor_id
    return cfg


def post_tool(tool: str, args: dict[str, Any], workflow_id: str) -> Any:
    """The step: the tool's HTTP call, as ToolOps' transport sends it."""
    response = _pool.request(
        "POST",
        f"{DOWNSTREAM}/write",
        body=json.dumps(args, separators=(",", ":")).encode(),
        headers={"Content-Type": "application/json", "Idempotency-Key": workflow_id},
        timeout=_TIMEOUT,
        redirect=False,
    )
    if not 200 <= response.status < 300:
        raise RuntimeError(f"{tool}: HTTP {response.status}")
    return json.loads(response.data) if response.data else None


post_tool_step = DBOS.step(name="post_tool")(post_tool)


@DBOS.workflow(name="call_tool")
def call_tool(tool: str, args: dict[str, Any]) -> Any:
    workflow_id = DBOS.workflow_id or ""
    return post_tool_step(tool, args, workflow_id)


@DBOS.workflow(name="call_tool_async")
async def call_tool_async(tool: str, args: dict[str, Any]) -> Any:
    workflow_id = DBOS.workflow_id or ""
    return await DBOS.run_step_async({"name": "post_tool"}, post_tool, tool, args, workflow_id)


def run_call(workflow_id: str, tool: str, args: dict[str, Any]) -> Any:
    """One call, sync: the workflow with this ID (run once; a known ID answers its output)."""
    with SetWorkflowID(workflow_id):
        return call_tool(tool, args)


async def run_call_async(workflow_id: str, tool: str, args: dict[str, Any]) -> Any:
    with SetWorkflowID(workflow_id):
        return await call_tool_async(tool, args)


def launch() -> None:
    DBOS(config=config(executor_id=f"bench-{os.getpid()}"))
    DBOS.launch()
    atexit.register(DBOS.destroy)


# -- the ASGI app ------------------------------------------------------------------------


def _problem(message: str) -> bytes:
    return json.dumps({"message": message}).encode()


async def _handle(run_id: str, body: bytes) -> tuple[int, bytes]:
    try:
        data = json.loads(body)
        step, tool, args = data["step_index"], data["tool"], data["args"]
        if not (isinstance(step, int) and isinstance(tool, str) and isinstance(args, dict)):
            raise ValueError
    except (ValueError, KeyError, TypeError):
        return 400, _problem("expected {step_index: int, tool: str, args: {}}")
    workflow_id = f"{run_id}/{step}/{tool}"
    try:
        if MODE == "async":
            result = await run_call_async(workflow_id, tool, args)
        else:
            result = await asyncio.to_thread(run_call, workflow_id, tool, args)
    except Exception as exc:  # the peer answers a failed workflow as ToolOps would a call
        failed = {"workflow_id": workflow_id, "status": "failed", "error": str(exc)[:300]}
        return 200, json.dumps(failed).encode()
    done = {"workflow_id": workflow_id, "status": "succeeded", "result": result}
    return 200, json.dumps(done, separators=(",", ":")).encode()


app = post_app(PREFIX, SUFFIX, _handle)


def main() -> None:
    parser = argparse.ArgumentParser(description="DBOS peer: create the system database.")
    parser.add_argument("--migrate", action="store_true", help="create and migrate it")
    options = parser.parse_args()
    if options.migrate:
        DBOS.migrate(config()["system_database_url"] or "")


if __name__ == "__main__":
    main()
