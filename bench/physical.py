"""The physical endpoint: what a budgeted ToolOps write must physically do, and nothing
else — no framework, no ORM — so that the bench can show how close ToolOps gets to it.

`POST /physical/runs/{run}/calls` with a write's body (`{step_index, tool, args,
tokens}`, as ToolOps is sent), per request:

1. parse the JSON body (and its idempotency key: SHA-256 of run, step, tool and the args
   written canonically, as the floor computes it);
2. one SELECT reading the run row by its id (ToolOps' context read);
3. one statement claiming the key, inserting the call row and charging the run's
   counters — a data-modifying CTE, as ToolOps' claim (its charge conditional on the
   run's limits, and everything conditional on the claim being won);
4. the same no-op downstream through a pooled keep-alive urllib3 PoolManager (ToolOps'
   HTTP client, the same pool options);
5. one statement recording the result, the claim's state and an attempt row (a CTE);
6. the call answered as JSON.

Raw psycopg 3 through a psycopg_pool ConnectionPool (the size ToolOps' defaults give it,
autocommit: each statement commits alone, as ToolOps' three do), one connection held for
the request. The request's sync part runs whole in one hop onto the event loop's pool of
threads, as ToolOps' API and the DBOS peer run theirs. Its tables (`bench_phys_*`) live
in the bench database, created with its runs by `create_tables` (bench/run.py) before
the servers start.

Environment: `DATABASE_URL` (the bench database), `BENCH_DOWNSTREAM_URL` (the no-op
downstream's base URL).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import secrets
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import urllib3

from bench.asgi_plumbing import post_app

DOWNSTREAM = os.environ.get("BENCH_DOWNSTREAM_URL", "http://127.0.0.1:9100")
PREFIX = b"/physical/runs/"
SUFFIX = b"/calls"
# A budget that never runs out during the bench (bench/cases.py BUDGET).
MAX_ATTEMPTS = 1_000_000_000
MAX_TOKENS = 10**12

SCHEMA = """
CREATE TABLE IF NOT EXISTS bench_phys_run (
    id bigserial PRIMARY KEY,
    run_id varchar(128) NOT NULL UNIQUE,
    status varchar(24) NOT NULL DEFAULT 'running',
    max_attempts bigint,
    max_tokens bigint,
    attempts_used bigint NOT NULL DEFAULT 0,
    tokens_used bigint NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS bench_phys_claim (
    key varchar(64) PRIMARY KEY,
    call_ref varchar(40) NOT NULL,
    state varchar(16) NOT NULL,
    fence integer NOT NULL,
    lease_until timestamptz NOT NULL,
    created_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL,
    recorded_at timestamptz
);
CREATE TABLE IF NOT EXISTS bench_phys_call (
    id bigserial PRIMARY KEY,
    call_id varchar(40) NOT NULL UNIQUE,
    run_id bigint NOT NULL REFERENCES bench_phys_run (id),
    step_index integer NOT NULL,
    tool varchar(128) NOT NULL,
    args jsonb NOT NULL,
    tokens bigint NOT NULL,
    status varchar(24) NOT NULL,
    result jsonb,
    attempts integer NOT NULL DEFAULT 0,
    created_at timestamptz NOT NULL,
    finished_at timestamptz
);
CREATE INDEX IF NOT EXISTS bench_phys_call_run ON bench_phys_call (run_id);
CREATE TABLE IF NOT EXISTS bench_phys_attempt (
    id bigserial PRIMARY KEY,
    call_id bigint NOT NULL REFERENCES bench_phys_call (id),
    number integer NOT NULL,
    started_at timestamptz NOT NULL,
    duration_ms double precision NOT NULL,
    http_status integer,
    outcome varchar(16) NOT NULL
);
CREATE INDEX IF NOT EXISTS bench_phys_attempt_call ON bench_phys_attempt (call_id);
"""

READ_RUN = (
    "SELECT id, status, max_attempts, max_tokens, attempts_used, tokens_used "
    "FROM bench_phys_run WHERE run_id = %s"
)
# The claim (unique key: one winner), the run's charge (only if it fits the limits), the
# call row — each conditional on the claim, in one statement that commits alone.
CLAIM = (
    "WITH claim AS (INSERT INTO bench_phys_claim "
    "(key, call_ref, state, fence, lease_until, created_at, expires_at) "
    "VALUES (%s, %s, 'claimed', 1, statement_timestamp() + interval '30 seconds', "
    "statement_timestamp(), statement_timestamp() + interval '7 days') "
    "ON CONFLICT (key) DO NOTHING RETURNING 1), "
    "charge AS (UPDATE bench_phys_run SET attempts_used = attempts_used + 1, "
    "tokens_used = tokens_used + %s WHERE id = %s "
    "AND (max_attempts IS NULL OR attempts_used < max_attempts) "
    "AND (max_tokens IS NULL OR tokens_used + %s <= max_tokens) "
    "AND EXISTS (SELECT 1 FROM claim) RETURNING 1), "
    "ins AS (INSERT INTO bench_phys_call "
    "(call_id, run_id, step_index, tool, args, tokens, status, created_at) "
    "SELECT %s, %s, %s, %s, %s::jsonb, %s, 'in_progress', statement_timestamp() "
    "WHERE EXISTS (SELECT 1 FROM claim) RETURNING id, created_at) "
    "SELECT (SELECT id FROM ins), (SELECT created_at FROM ins), "
    "EXISTS (SELECT 1 FROM charge)"
)
# The result lands only while the claim is ours (fence), with its attempt, in one
# statement that commits alone.
RECORD = (
    "WITH rec AS (UPDATE bench_phys_claim SET state = 'recorded', "
    "recorded_at = statement_timestamp() WHERE key = %s AND fence = 1 "
    "AND state <> 'recorded' RETURNING 1), "
    "upd AS (UPDATE bench_phys_call SET status = %s, result = %s::jsonb, attempts = 1, "
    "finished_at = statement_timestamp() WHERE id = %s AND EXISTS (SELECT 1 FROM rec) "
    "RETURNING finished_at), "
    "ins AS (INSERT INTO bench_phys_attempt "
    "(call_id, number, started_at, duration_ms, http_status, outcome) "
    "VALUES (%s, 1, %s, %s, %s, %s)) "
    "SELECT finished_at FROM upd"
)

# As toolops/tools/http.py: one pool per process, keep-alive, no client-side retries.
_http = urllib3.PoolManager(num_pools=50, maxsize=32, block=False, retries=False)
_TIMEOUT = urllib3.Timeout(connect=10.0, read=10.0)
_db: Any = None  # the psycopg_pool.ConnectionPool, opened by launch()


class Refused(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def create_tables(url: str, run_ids: Sequence[str]) -> None:
    """The endpoint's tables in the bench database, and its runs (with a budget)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(SCHEMA)
        for run_id in run_ids:
            conn.execute(
                "INSERT INTO bench_phys_run (run_id, max_attempts, max_tokens) "
                "VALUES (%s, %s, %s) ON CONFLICT (run_id) DO NOTHING",
                [run_id, MAX_ATTEMPTS, MAX_TOKENS],
            )


def launch() -> Any:
    """Open the connection pool (ToolOps' defaults: 2 to 20 connections), autocommit."""
    global _db
    from psycopg_pool import ConnectionPool

    url = os.environ["DATABASE_URL"]
    _db = ConnectionPool(
        url, min_size=2, max_size=20, kwargs={"autocommit": True}, open=True, timeout=5.0
    )
    _db.wait(timeout=30)
    return _db


EXPECTED = "expected {step_index: int, tool: str, args: {}, tokens?: int}"


def parse(body: bytes) -> tuple[int, str, dict[str, Any], int]:
    try:
        data = json.loads(body)
        step, tool, args = data["step_index"], data["tool"], data["args"]
        tokens = data.get("tokens", 0)
    except (ValueError, KeyError, TypeError):
        raise Refused(400, EXPECTED) from None
    valid = isinstance(step, int) and isinstance(tool, str) and isinstance(args, dict)
    if not valid or not isinstance(tokens, int) or tokens < 0:
        raise Refused(400, EXPECTED)
    return step, tool, args, tokens


def post_tool(args_json: bytes, key: str) -> tuple[int, Any, float]:
    """The tool's HTTP call, as ToolOps' transport sends it: status, answer, ms taken."""
    t0 = time.perf_counter()
    response = _http.request(
        "POST",
        f"{DOWNSTREAM}/write",
        body=args_json,
        headers={"Content-Type": "application/json", "Idempotency-Key": key},
        timeout=_TIMEOUT,
        redirect=False,
    )
    answer = json.loads(response.data) if response.data else None
    return response.status, answer, (time.perf_counter() - t0) * 1000


def write(run_id: str, body: bytes) -> dict[str, Any]:
    """One budgeted write, whole: three statements around one downstream call."""
    step, tool, args, tokens = parse(body)
    canonical = json.dumps(args, sort_keys=True, separators=(",", ":"))
    key = hashlib.sha256(f"{run_id}:{step}:{tool}:{canonical}".encode()).hexdigest()
    call_id = f"c-{time.time_ns():x}{secrets.token_hex(7)}"  # time-ordered, as ToolOps'
    with _db.connection() as conn:
        run = conn.execute(READ_RUN, [run_id]).fetchone()
        if run is None:
            raise Refused(404, f"no run {run_id!r}")
        if run[1] != "running":
            raise Refused(409, f"the run is {run[1]}")
        pk, created, charged = conn.execute(
            CLAIM,
            [key, call_id, tokens, run[0], tokens, call_id, run[0], step, tool, canonical, tokens],
        ).fetchone()
        if pk is None:
            raise Refused(409, "this call was already claimed")
        if not charged:  # never in the bench: its runs' limits are out of reach
            raise Refused(409, "the run's budget does not fit this call")
        started = time.time()
        status, answer, took_ms = post_tool(canonical.encode(), key)
        outcome = "succeeded" if 200 <= status < 300 else "failed"
        (finished,) = conn.execute(
            RECORD,
            [
                key,
                outcome,
                json.dumps(answer),
                pk,
                pk,
                _utc(started),
                took_ms,
                status,
                "ok" if outcome == "succeeded" else "error",
            ],
        ).fetchone()
    return {
        "call_id": call_id,
        "run_id": run_id,
        "step_index": step,
        "tool": tool,
        "status": outcome,
        "result": answer,
        "attempts": 1,
        "replayed": False,
        "created_at": created.isoformat(),
        "finished_at": finished.isoformat(),
    }


def _utc(epoch_s: float) -> datetime:
    return datetime.fromtimestamp(epoch_s, UTC)


# -- the ASGI app ------------------------------------------------------------------------


async def _handle(run_id: str, body: bytes) -> tuple[int, bytes]:
    try:
        answer = await asyncio.to_thread(write, run_id, body)
    except Refused as exc:
        return exc.status, json.dumps({"message": str(exc)}).encode()
    return 200, json.dumps(answer, separators=(",", ":")).encode()


app = post_app(PREFIX, SUFFIX, _handle)
