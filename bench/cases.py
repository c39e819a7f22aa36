"""What the benchmark sends: the catalog of the bench tools, the ToolOps runs and call
bodies, and the targets of each case (direct downstream, floor, the physical endpoint,
DBOS, ToolOps write with and without a budget, read, replay)."""

from __future__ import annotations

import http.client
import json
import time
from collections.abc import Callable, Sequence
from typing import Any

from bench.load import CONCURRENCY, Sample, Target
from bench.procs import HOST, BenchError

TOOLOPS_APP = "toolops.asgi:application"
TOOLOPS_WSGI_APP = "bench.toolops_wsgi:application"  # --study only
FLOOR_APP = "bench.floor.asgi:application"
DOWNSTREAM_APP = "bench.downstream:app"
DBOS_APP = "bench.dbos_asgi:application"
PHYSICAL_APP = "bench.physical_asgi:application"

# A budget as the design asks of every real run, generous enough never to run out during
# the bench, so that each call pays for checking and counting it and nothing else.
BUDGET = {"max_attempts": 1_000_000_000, "max_seconds": 7 * 86400.0, "max_tokens": 10**12}
TOKENS = 50  # what each budgeted write reports having cost

PARAMS_SCHEMA = '{ type = "object", required = ["n"], properties = { n = { type = "integer" } } }'
CATALOG = """\
[[tool]]
name = "bench_write"
kind = "idempotent_write"
description = "No-op write for the benchmark."
url = "{url}/write"
method = "POST"
params_schema = {schema}

[[tool]]
name = "bench_undoable"
kind = "compensable_write"
description = "No-op write whose undo is registered with its result (statement count only)."
url = "{url}/write"
method = "POST"
idempotency_header = true
compensation = {{ tool = "bench_write", args = {{ n = "$.args.n" }} }}
params_schema = {schema}

[[tool]]
name = "bench_read"
kind = "read"
description = "No-op read for the benchmark."
url = "{url}/read"
method = "POST"
params_schema = {schema}
"""


def api(port: int, method: str, path: str, token: str, body: Any = None) -> tuple[int, Any]:
    conn = http.client.HTTPConnection(HOST, port, timeout=30)
    payload = json.dumps(body).encode() if body is not None else None
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    conn.request(method, path, payload, headers)
    response = conn.getresponse()
    data = response.read()
    conn.close()
    return response.status, json.loads(data) if data else None


def create_runs(
    port: int, token: str, run_ids: Sequence[str], budget: dict[str, Any] | None = None
) -> None:
    for run_id in run_ids:
        request: dict[str, Any] = {"run_id": run_id}
        if budget is not None:
            request["budget"] = budget
        status, body = api(port, "POST", "/api/v1/runs", token, request)
        if status not in (200, 201):
            raise BenchError(f"cannot create run {run_id}: {status} {body}")
        if budget is not None and any(body["budget"].get(k) != v for k, v in budget.items()):
            raise BenchError(f"run {run_id} was created without its budget: {body}")


def call_body(
    step: int, tool: str, n: int, tool_call_id: str | None = None, tokens: int | None = None
) -> bytes:
    body: dict[str, Any] = {"step_index": step, "tool": tool, "args": {"n": n}}
    if tool_call_id is not None:
        body["tool_call_id"] = tool_call_id
    if tokens is not None:
        body["tokens"] = tokens
    return json.dumps(body).encode()


def toolops_targets(
    ports: list[int], token: str, prefix: str, *, tool_call_ids: bool = False
) -> dict[str, Target]:
    """Without tool_call_ids a replay is found by its idempotency key (same run, step,
    tool and args); with them, by its tool_call_id. `write_budget` writes in runs created
    with BUDGET, each call reporting TOKENS."""
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {token}"}
    ok = (b'"status":"succeeded"', b'"replayed":false')

    def tcid(kind: str, seq: int) -> str | None:
        return f"tc-{kind}-{seq}" if tool_call_ids else None

    return {
        "write": Target(
            "ToolOps write",
            ports,
            lambda t: f"/api/v1/runs/{prefix}-w{t}/calls",
            lambda t, s: call_body(s, "bench_write", s, tcid("w", s)),
            headers,
            ok,
        ),
        "write_budget": Target(
            "ToolOps write (budget)",
            ports,
            lambda t: f"/api/v1/runs/{prefix}-b{t}/calls",
            lambda t, s: call_body(s, "bench_write", s, tcid("b", s), TOKENS),
            headers,
            ok,
        ),
        "read": Target(
            "ToolOps read",
            ports,
            lambda t: f"/api/v1/runs/{prefix}-r{t}/calls",
            lambda t, s: call_body(s, "bench_read", s, tcid("r", s)),
            headers,
            ok,
        ),
        "replay": Target(
            "ToolOps replay",
            ports,
            lambda t: f"/api/v1/runs/{prefix}-replay/calls",
            lambda t, s: call_body(0, "bench_write", 0, tcid("w", 0)),
            headers,
            (b'"status":"succeeded"', b'"replayed":true'),
        ),
    }


def toolops_run_ids(prefix: str) -> list[str]:
    """The runs without a budget: one per client thread for writes and for reads, and the
    replay's run."""
    return [f"{prefix}-{kind}{t}" for kind in "wr" for t in range(max(CONCURRENCY))] + [
        f"{prefix}-replay"
    ]


def budget_run_ids(prefix: str) -> list[str]:
    """The runs created with BUDGET, one per client thread."""
    return [f"{prefix}-b{t}" for t in range(max(CONCURRENCY))]


def check_budget_run(port: int, token: str, prefix: str) -> dict[str, Any]:
    """A budgeted run after the measurement: still running, its attempts and tokens
    counted for every call, none of its limits reached."""
    status, run = api(port, "GET", f"/api/v1/runs/{prefix}-b0", token)
    if status != 200:
        raise BenchError(f"cannot read the budgeted run: {status} {run}")
    # A run past 1,000 calls lists the first 1,000 and says how many it has.
    calls, usage = run.get("calls_total", len(run["calls"])), run["usage"]
    found = {
        "run_id": run["run_id"],
        "status": run["status"],
        "calls": calls,
        "budget": run["budget"],
        "usage": usage,
    }
    if run["status"] != "running" or usage["tokens"] != TOKENS * calls:
        raise BenchError(f"the budgeted run did not count its calls as expected: {found}")
    return found


def prime_replay(port: int, token: str, prefix: str, *, tool_call_ids: bool = False) -> None:
    status, body = api(
        port,
        "POST",
        f"/api/v1/runs/{prefix}-replay/calls",
        token,
        json.loads(call_body(0, "bench_write", 0, "tc-w-0" if tool_call_ids else None)),
    )
    if status != 200 or body.get("status") != "succeeded" or body.get("replayed"):
        raise BenchError(f"the first write of the replay run did not succeed: {status} {body}")


def direct_target(port: int, kind: str = "write") -> Target:
    # What ToolOps sends the tool: its args as JSON plus its headers.
    headers = {
        "Content-Type": "application/json",
        "Idempotency-Key": "0" * 64,
        "traceparent": f"00-{'0' * 31}1-{'0' * 15}1-01",
        "X-Toolops-Run-Id": "bench",
        "X-Toolops-Tool-Call-Id": "tc-bench",
        "X-Toolops-Attempt": "1",
    }
    return Target(
        "direct",
        [port],
        lambda t: f"/{kind}",
        lambda t, s: json.dumps({"n": s}).encode(),
        headers,
        (b'"ok"',),
    )


def floor_target(ports: list[int]) -> Target:
    return Target(
        "floor",
        ports,
        lambda t: f"/floor/runs/bench-floor-{t}/calls",
        lambda t, s: call_body(s, "bench_write", s),
        {"Content-Type": "application/json"},
        (b'"status":"succeeded"',),
    )


def physical_run_ids() -> list[str]:
    """The physical endpoint's runs (bench/physical.py, created with a budget), one per
    client thread."""
    return [f"phys-{t}" for t in range(max(CONCURRENCY))]


def physical_target(ports: list[int]) -> Target:
    """The physical endpoint: the budgeted write's body, a new key every call."""
    return Target(
        "physical",
        ports,
        lambda t: f"/physical/runs/phys-{t}/calls",
        lambda t, s: call_body(s, "bench_write", s, tokens=TOKENS),
        {"Content-Type": "application/json"},
        (b'"status":"succeeded"',),
    )


def dbos_target(ports: list[int], prefix: str) -> Target:
    """The DBOS peer: the write's body, a new workflow ID (run/step/tool) every call."""
    return Target(
        "DBOS",
        ports,
        lambda t: f"/dbos/runs/{prefix}-d{t}/calls",
        lambda t, s: call_body(s, "bench_write", s),
        {"Content-Type": "application/json"},
        (b'"status":"succeeded"',),
    )


def ping_target(ports: list[int]) -> Target:
    return Target(
        "floor ping",
        ports,
        lambda t: "/floor/ping",
        lambda t, s: b"{}",
        {"Content-Type": "application/json"},
        (b'"ok"',),
    )


def client_costs(port: int, total: int) -> dict[str, dict[str, float | int | None]]:
    """The downstream at conc 1 through the HTTP clients a transport might use (each
    pooled, keep-alive, no retries): what the client itself costs per request. The
    `direct` row is http.client."""
    target = direct_target(port)
    url = f"http://{HOST}:{port}/write"
    senders: dict[str, Callable[[int], int]] = {}
    closers: list[Callable[[], None]] = []
    try:
        import urllib3

        pool = urllib3.PoolManager(retries=False)
        closers.append(pool.clear)

        def via_urllib3(s: int) -> int:
            body = json.dumps({"n": s}).encode()
            response = pool.request("POST", url, body=body, headers=target.headers, timeout=5)
            json.loads(response.data)
            return response.status

        senders["urllib3"] = via_urllib3
    except ImportError:
        pass
    try:
        import httpx

        client = httpx.Client(transport=httpx.HTTPTransport(retries=0), trust_env=False)
        closers.append(client.close)

        def via_httpx(s: int) -> int:
            response = client.post(url, json={"n": s}, headers=target.headers, timeout=5)
            response.json()
            return response.status_code

        senders["httpx"] = via_httpx
    except ImportError:
        pass
    found: dict[str, dict[str, float | int | None]] = {}
    try:
        for name, send in senders.items():
            sample = Sample()
            for s in range(total + 50):
                t0 = time.perf_counter_ns()
                status = send(s)
                elapsed = time.perf_counter_ns() - t0
                if status != 200:
                    raise BenchError(f"downstream via {name}: HTTP {status}")
                if s >= 50:
                    sample.latencies_ns.append(elapsed)
                    sample.elapsed_s += elapsed / 1e9
            found[name] = sample.stats()
    finally:
        for close in closers:
            close()
    return found
