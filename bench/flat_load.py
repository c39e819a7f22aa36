"""The data of the flat-with-data bench (bench/flat.py): runs, calls, attempts and
idempotency records, generated inside PostgreSQL by set-based SQL in batches, the tables'
indexes in place as `manage.py migrate` made them.

Why the indexes stay: the keys of the real form (SHA-256 hex of run, step, tool and
canonical args; call ids from UUIDs) arrive in random order, so a B-tree grown by them has
leaf pages split half-full and refilled, as a deployed one has. Dropping the indexes and
building them after the load would be faster but would give packed indexes (fillfactor
90, no splits yet), smaller than any deployment's and split on nearly every new key at
first: not the table the goal is about. The load pays for that with minutes.

What the load skips is what a deployment's inserts pay and a generated table does not need:
foreign-key checks (session_replication_role = replica; the rows are consistent by
construction), a synchronous commit per batch, and autovacuum during the load (one VACUUM
ANALYZE at the end instead, then a CHECKPOINT, so that neither runs during the measuring).

The layout, for N rows: one call, one attempt and one idempotency record per row; 50 calls
per run (N / 50 runs), the runs spread round-robin over four agents, half of them with a
budget, a quarter in a session; five tools (bench_write, the tool the bench calls, among
them). Timestamps are spread evenly over the idempotency TTL (7 days, the default) and 5%
more, so that about 5% of the records are past their `expires_at` and not yet purged;
runs older than ten minutes have completed.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bench.procs import AGENT_RATE_LIMIT, BenchError

CALLS_PER_RUN = 50
AGENTS = 4
TOOLS = ("bench_write", "create_order", "send_email", "refund_payment", "update_ticket")
TTL_S = 7 * 86400.0  # TOOLOPS_IDEMPOTENCY_TTL_S's default
WINDOW_S = TTL_S * 1.05
# Bumped whenever the generated rows change, so that a kept database is loaded again.
LAYOUT = 1
BATCH_RUNS = 2000  # 100,000 rows of each table per statement
# Measured: what one row (a call, an attempt, a record, their index entries, and the run's
# share) takes on disk; used to check for space before loading.
BYTES_PER_ROW = 1800

Say = Callable[[str], None]


def _hex(n: int) -> str:
    """SQL for n random hex digits (n ≤ 32)."""
    return f"left(replace(gen_random_uuid()::text, '-', ''), {n})"


# One statement per batch of runs [lo, hi]: the runs, their calls, one attempt and one
# idempotency record per call. Ids of runs and calls are given (base + number) so that
# every insert reads the same generated rows and nothing needs RETURNING.
BATCH_SQL = f"""
WITH r AS MATERIALIZED (
  SELECT g, %(run_base)s + g AS id,
         (%(agents)s::bigint[])[1 + g %% {AGENTS}] AS agent_id,
         'run-' || {_hex(24)} AS run_id,
         {_hex(32)} AS trace_id,
         CASE WHEN g %% 4 = 0 THEN 'session-' || (g / 8)::text END AS session_key,
         g %% 2 = 0 AS budgeted,
         least({CALLS_PER_RUN}, %(rows)s - (g - 1) * {CALLS_PER_RUN}) AS calls,
         %(t0)s::timestamptz - make_interval(secs => {WINDOW_S})
           + make_interval(secs => (g - 1 + random()) * {WINDOW_S} / %(runs)s) AS created_at,
         'cus_' || {_hex(12)} AS customer
  FROM generate_series(%(lo)s::bigint, %(hi)s::bigint) AS g
), runs AS (
  INSERT INTO toolops_run (id, agent_id, run_id, trace_id, session_key, status,
    max_attempts, max_seconds, max_tokens, attempts_used, tokens_used, metadata,
    end_reason, created_at, ended_at)
  SELECT id, agent_id, run_id, trace_id, session_key,
         CASE WHEN ended THEN 'completed' ELSE 'running' END,
         CASE WHEN budgeted THEN 200 END, CASE WHEN budgeted THEN 3600.0 END,
         CASE WHEN budgeted THEN 200000 END,
         CASE WHEN budgeted THEN calls ELSE 0 END,
         CASE WHEN budgeted THEN calls * 50 ELSE 0 END,
         '{{}}'::jsonb, '', created_at,
         CASE WHEN ended THEN created_at + make_interval(secs => calls * 2 + 1) END
  FROM (SELECT r.*, created_at + make_interval(secs => calls * 2 + 1)
                    < %(t0)s::timestamptz - interval '10 minutes' AS ended FROM r) AS e
), x AS MATERIALIZED (
  SELECT c.*, 'tops-' || left(c.key, 32) AS client_reference, 'c-' || {_hex(32)} AS call_id
  FROM (
    SELECT v.*,
           encode(sha256(convert_to(v.agent_id || '/' || v.run_id || ':' || v.step || ':'
                  || v.tool || ':' || v.canonical, 'UTF8')), 'hex') AS key
    FROM (
      SELECT r.id AS run_pk, r.agent_id, r.run_id, r.budgeted, s AS step,
             %(call_base)s + (r.g - 1) * {CALLS_PER_RUN} + s + 1 AS id,
             (%(tools)s::text[])[1 + (r.g + s) %% {len(TOOLS)}] AS tool,
             '{{"amount":' || (r.g * 31 + s * 7) %% 10000 || ',"currency":"EUR","customer":"'
               || r.customer || '","note":"step ' || s || ' of an agent run","order":"ord-'
               || r.g || '-' || s || '"}}' AS canonical,
             r.created_at + make_interval(secs => s * 2 + random()) AS created_at,
             20 + random() * 380 AS duration_ms
      FROM r CROSS JOIN LATERAL generate_series(0, r.calls - 1) AS s
    ) AS v
  ) AS c
), calls AS (
  INSERT INTO toolops_toolcall (id, call_id, run_id, tool_call_id, step_index, tool, args,
    args_digest, idempotency_key, client_reference, depends_on, tokens, status, result,
    error_class, error_reason, error_message, feedback, attempts, span_id, trace_id,
    parent_span_id, link, result_sealed, created_at, finished_at, reconcile_attempts,
    next_reconcile_at, settled_by_id, settle_note, role, approval_id)
  SELECT id, call_id, run_pk, 'tc-' || {_hex(16)}, step, tool, canonical::jsonb,
         encode(sha256(convert_to(canonical, 'UTF8')), 'hex'), key, client_reference,
         '[]'::jsonb, CASE WHEN budgeted THEN 50 ELSE 0 END, 'succeeded',
         ('{{"ok": true, "id": "' || tool || '-' || id || '", "state": "done"}}')::jsonb,
         '', '', '', tool || ' succeeded. Use its result; do not call it again for the '
         'same step.', 1, {_hex(16)}, '', '', '', '',
         created_at, created_at + make_interval(secs => duration_ms / 1000), 0,
         NULL, NULL, '', 'call', NULL
  FROM x
), records AS (
  INSERT INTO toolops_idempotencyrecord ("key", call_ref, tool, state, fence, lease_until,
    created_at, recorded_at, expires_at)
  SELECT "key", call_id, tool, 'recorded', 1, created_at + interval '30 seconds',
         created_at, created_at + make_interval(secs => duration_ms / 1000),
         created_at + make_interval(secs => {TTL_S})
  FROM x
)
INSERT INTO toolops_attempt (call_id, number, span_id, started_at, duration_ms, waited_ms,
  http_status, outcome, reason, error, downstream_request_id, purpose, health, tool)
SELECT id, 1, {_hex(16)}, created_at + interval '1 millisecond', duration_ms - 1, 0, 200,
       'ok', '', '', '', 'call', 'success', tool
FROM x
"""

LOADED_TABLES = ("toolops_idempotencyrecord", "toolops_toolcall", "toolops_attempt", "toolops_run")


@dataclass
class Loaded:
    rows: int
    seconds: float
    reused: bool
    size_bytes: int
    detail: dict[str, Any]


def database_size(conn: Any) -> int:
    return int(conn.execute("SELECT pg_database_size(current_database())").fetchone()[0])


def table_sizes(conn: Any) -> dict[str, dict[str, int]]:
    """Each loaded table's heap and index bytes, and its indexes one by one."""
    found: dict[str, dict[str, int]] = {}
    for table in LOADED_TABLES:
        heap, indexes = conn.execute(
            "SELECT pg_table_size(%s::regclass), pg_indexes_size(%s::regclass)", [table, table]
        ).fetchone()
        found[table] = {"heap": int(heap), "indexes": int(indexes)}
        for name, size in conn.execute(
            "SELECT indexrelid::regclass::text, pg_relation_size(indexrelid) FROM pg_index "
            "WHERE indrelid = %s::regclass ORDER BY 2 DESC",
            [table],
        ):
            found[table][f"index {name}"] = int(size)
    return found


def marker(conn: Any) -> dict[str, Any] | None:
    """What the last complete load wrote in the database's comment, or None."""
    row = conn.execute(
        "SELECT shobj_description(oid, 'pg_database') FROM pg_database "
        "WHERE datname = current_database()"
    ).fetchone()
    try:
        found = json.loads(row[0]) if row and row[0] else None
    except ValueError:
        return None
    return found if isinstance(found, dict) and found.get("bench") == "flat" else None


def applied_migrations(conn: Any) -> list[str]:
    return [
        f"{app}.{name}"
        for app, name in conn.execute("SELECT app, name FROM django_migrations ORDER BY id")
    ]


def reusable(
    conn: Any, rows: int, migrations_pending: bool, *, check_migrations: bool = True
) -> str | None:
    """Why the loaded database cannot be kept, or None when it can: a complete load of the
    same layout and size, less than a TTL old, under the migrations applied now, its rows
    still there."""
    found = marker(conn)
    if found is None:
        return "no complete load recorded"
    if found.get("layout") != LAYOUT:
        return f"loaded with layout {found.get('layout')}, the loader now makes {LAYOUT}"
    if not isinstance(found.get("loaded_at"), (int, float)):
        return "its load time is not recorded"
    age = time.time() - found["loaded_at"]
    if age > TTL_S:
        # Its timestamps are the load's: by now every record would be past its TTL.
        return f"loaded {age / 86400:.0f} days ago, longer than the records' TTL"
    if found.get("rows") != rows:
        return f"loaded with {found.get('rows'):,} rows, {rows:,} asked for"
    if check_migrations and migrations_pending:
        return "migrations not applied to it"
    if check_migrations and found.get("migrations") != applied_migrations(conn):
        return "migrated since it was loaded"
    for table in ("toolops_idempotencyrecord", "toolops_attempt", "toolops_toolcall"):
        count = conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
        if count < rows:
            return f"{table} holds {count:,} rows, fewer than {rows:,}"
    return None


def load(conn: Any, rows: int, say: Say) -> dict[str, Any]:
    """Generate `rows` rows of each table into a migrated, empty database (`conn` in
    autocommit). Returns the times of each phase."""
    started = time.monotonic()
    conn.execute("SET synchronous_commit = off")
    conn.execute("SET work_mem = '256MB'")
    conn.execute("SET maintenance_work_mem = '512MB'")
    try:
        conn.execute("SET session_replication_role = replica")  # no FK triggers
    except Exception:  # not a superuser: the checks run, the load is slower
        conn.rollback()
    for table in LOADED_TABLES:
        conn.execute(f"ALTER TABLE {table} SET (autovacuum_enabled = false)")
    agents = []
    for i in range(AGENTS):
        agents.append(
            conn.execute(
                "INSERT INTO toolops_agent (name, token_hash, token_hint, is_active, "
                "rate_limit_per_minute, created_at) "
                "VALUES (%s, encode(sha256(gen_random_uuid()::text::bytea), 'hex'), "
                "'tops_flat', true, %s, now()) RETURNING id",
                [f"flat-agent-{i}", AGENT_RATE_LIMIT],
            ).fetchone()[0]
        )
    runs = -(-rows // CALLS_PER_RUN)
    run_base, call_base = (
        conn.execute(f"SELECT coalesce(max(id), 0) FROM {t}").fetchone()[0]
        for t in ("toolops_run", "toolops_toolcall")
    )
    t0 = conn.execute("SELECT now()").fetchone()[0]
    params: dict[str, Any] = {
        "agents": agents,
        "tools": list(TOOLS),
        "rows": rows,
        "runs": runs,
        "t0": t0,
        "run_base": run_base,
        "call_base": call_base,
    }
    next_report = 0.1
    for lo in range(1, runs + 1, BATCH_RUNS):
        hi = min(runs, lo + BATCH_RUNS - 1)
        conn.execute(BATCH_SQL, {**params, "lo": lo, "hi": hi})
        done = min(rows, hi * CALLS_PER_RUN)
        if done / rows >= next_report or hi == runs:
            elapsed = time.monotonic() - started
            say(f"  loaded {done:,} of {rows:,} rows ({elapsed:.0f} s)")
            next_report = done / rows + 0.1
    inserted = time.monotonic()
    for table in ("toolops_run", "toolops_toolcall"):
        conn.execute(
            f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), (SELECT max(id) FROM {table}))"
        )
    for table in LOADED_TABLES:
        conn.execute(f"ALTER TABLE {table} RESET (autovacuum_enabled)")
    conn.execute("RESET session_replication_role")
    say("  VACUUM ANALYZE …")
    conn.execute("VACUUM (ANALYZE) " + ", ".join(LOADED_TABLES))
    vacuumed = time.monotonic()
    try:
        conn.execute("CHECKPOINT")  # superuser only: so that none falls in the measuring
    except Exception:
        conn.rollback()
    return {
        "insert_s": inserted - started,
        "vacuum_analyze_s": vacuumed - inserted,
        "checkpoint_s": time.monotonic() - vacuumed,
        "runs": runs,
        "agents": AGENTS,
        "calls_per_run": CALLS_PER_RUN,
        "tools": list(TOOLS),
        "window_days": WINDOW_S / 86400,
    }


def prewarm(conn: Any) -> int | None:
    """Read every index of the loaded tables into the OS page cache (pg_prewarm's `read`
    mode), as a server that has been taking writes for a while holds them: random keys
    touch every leaf page. Right after a load, or on a machine that has been doing other
    things, a part of them would come from disk instead. Bytes read, or None without the
    pg_prewarm extension."""
    try:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_prewarm")
    except Exception:
        return None
    blocks = conn.execute(
        "SELECT coalesce(sum(pg_prewarm(i.indexrelid, 'read')), 0) FROM pg_index i "
        "WHERE i.indrelid = ANY(%s::regclass[])",
        [list(LOADED_TABLES)],
    ).fetchone()[0]
    return int(blocks) * 8192


def agent_token(conn: Any) -> str:
    """A new API token for the first loaded agent, whose runs the bench's calls join: an
    agent with many runs (50,000 on 10M rows), as the statistics see a busy agent, not a
    new one with a handful (the run's look-up may take another index for an agent the
    statistics call rare). Hashed as toolops.accounts.models.token_digest hashes it. Its
    rate limit counted and never reached (AGENT_RATE_LIMIT), also on a database loaded
    before the bench set one."""
    token = "tops_" + secrets.token_urlsafe(32)
    found = conn.execute(
        "UPDATE toolops_agent SET token_hash = %s, token_hint = %s, rate_limit_per_minute = %s "
        "WHERE name = %s RETURNING 1",
        [hashlib.sha256(token.encode()).hexdigest(), token[:9], AGENT_RATE_LIMIT, "flat-agent-0"],
    ).fetchone()
    if found is None:
        raise BenchError("the loaded agent flat-agent-0 is missing")
    return token


def mark_loaded(conn: Any, name: str, rows: int, seconds: float) -> None:
    text = json.dumps(
        {
            "bench": "flat",
            "layout": LAYOUT,
            "rows": rows,
            "load_s": round(seconds, 1),
            "migrations": applied_migrations(conn),
            "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "loaded_at": time.time(),
        }
    )
    literal = conn.execute("SELECT quote_literal(%s)", [text]).fetchone()[0]
    conn.execute(f'COMMENT ON DATABASE "{name}" IS {literal}')


def mark_migrated(conn: Any, name: str) -> None:
    """The loaded database's marker, with the migrations now applied to it."""
    found = marker(conn) or {}
    found["migrations"] = applied_migrations(conn)
    literal = conn.execute("SELECT quote_literal(%s)", [json.dumps(found)]).fetchone()[0]
    conn.execute(f'COMMENT ON DATABASE "{name}" IS {literal}')


def counts(conn: Any) -> dict[str, int]:
    found = {}
    for table in LOADED_TABLES:
        found[table] = int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
    found["expired_records"] = int(
        conn.execute(
            "SELECT count(*) FROM toolops_idempotencyrecord WHERE expires_at < now()"
        ).fetchone()[0]
    )
    return found


def check_space(free_bytes: int, rows: int) -> None:
    need = int(rows * BYTES_PER_ROW * 1.2) + 2 * 1024**3  # + WAL and headroom
    if free_bytes < need:
        raise BenchError(
            f"not enough disk space for {rows:,} rows: {free_bytes / 1024**3:.1f} GiB free, "
            f"about {need / 1024**3:.1f} GiB needed (--rows to load fewer)"
        )
