"""Fairness under attack (`make bench`): agent B's request latency at rest, while agent C
sends wide args (16 streams of ~1 MiB bodies with 80,000 keys each: bench/wide.py), and
while agent A holds 64 long-polls on a call waiting for a reviewer (API.md, Conventions:
fairness).

Before long-polls waited on the event loop, each held one of the API's threads, and B's
`GET /tools` queued behind them (6.8 s measured). Before the JSON widths and the work
budget, each wide body cost half a second of CPU and B's `GET /tools` took seconds; the
same attack on a process with both turned off is measured last, for comparison. Here: one
ToolOps process as `make run` serves it (default threads), A's in-flight cap raised to 64
so that every long-poll is held, B's requests one after another on one connection:
`GET /tools` and a `read` call to a no-op downstream. Prints the figures and the goal
(B's `GET /tools` p99 under 100 ms during the wide-args attack); writes
bench/results/attack.json."""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import secrets
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# First, before this folder: bench/traces.py must not shadow the traces package.
sys.path.insert(0, str(ROOT))

from bench.cases import TOOLOPS_APP  # noqa: E402 - after the path is set
from bench.db import fresh_database  # noqa: E402
from bench.procs import (  # noqa: E402
    AGENT_RATE_LIMIT,
    BENCH,
    HOST,
    PY,
    BenchError,
    Processes,
    free_ports,
    interrupts_as_exceptions,
    run_checked,
    uvicorn_argv,
    wait_http,
)
from bench.wide import UNBOUNDED_ENV, WideAttack  # noqa: E402

POLLS = 64
# The goal: B's GET /tools p99 while C sends wide args, on a process with the bounds on.
WIDE_P99_GOAL_MS = 100.0
CATALOG = """\
[[tool]]
name = "bench_read"
kind = "read"
description = "No-op read for the benchmark."
url = "{url}/read"
method = "POST"
params_schema = {{ type = "object" }}

[[tool]]
name = "bench_held"
kind = "idempotent_write"
description = "A write that waits for a reviewer: what agent A long-polls."
url = "{url}/write"
method = "POST"
requires_approval = true
params_schema = {{ type = "object" }}
"""


class Agent:
    """One agent's keep-alive connection to the API."""

    def __init__(self, port: int, token: str) -> None:
        self.port = port
        self.conn = http.client.HTTPConnection(HOST, port, timeout=60)
        self.headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        self.reconnects = 0

    def send(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        payload = json.dumps(body).encode() if body is not None else None
        try:
            return self._send(method, path, payload)
        except (http.client.RemoteDisconnected, ConnectionError):
            # A starved server's keep-alive timer can fire before its loop reads the
            # request waiting on the connection: the request is sent again on a new one,
            # and the time lost is part of what the agent waited.
            self.reconnects += 1
            self.conn.close()
            self.conn = http.client.HTTPConnection(HOST, self.port, timeout=60)
            return self._send(method, path, payload)

    def _send(self, method: str, path: str, payload: bytes | None) -> tuple[int, Any]:
        self.conn.request(method, f"/api/v1{path}", body=payload, headers=self.headers)
        response = self.conn.getresponse()
        return response.status, json.loads(response.read() or b"null")


def measure(b: Agent, count: int, step0: int) -> dict[str, dict[str, float]]:
    """B's latencies: `count` GET /tools and `count` read calls, interleaved."""
    tools: list[float] = []
    reads: list[float] = []
    for n in range(count):
        t0 = time.perf_counter()
        status, _ = b.send("GET", "/tools")
        tools.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        status2, call = b.send(
            "POST",
            "/runs/r-b/calls",
            {
                "step_index": step0 + n,
                "tool": "bench_read",
                "args": {"n": n},
            },
        )
        reads.append(time.perf_counter() - t0)
        if status != 200 or status2 != 200 or call["status"] != "succeeded":
            raise BenchError(f"agent B was not served: {status} {status2} {call}")
    return {"get_tools": stats(tools), "read_call": stats(reads)}


def stats(seconds: list[float]) -> dict[str, float]:
    ordered = sorted(seconds)
    n = len(ordered)
    return {
        "n": n,
        "p50_ms": statistics.median(ordered) * 1000,
        "p99_ms": ordered[min(n - 1, -(-99 * n // 100) - 1)] * 1000,
        "max_ms": ordered[-1] * 1000,
    }


def hold_long_polls(port: int, token: str, call_id: str) -> list[threading.Thread]:
    def poll() -> None:
        conn = http.client.HTTPConnection(HOST, port, timeout=60)
        with contextlib.suppress(OSError):  # the server stops at the end
            poll_until_held(conn)

    def poll_until_held(conn: http.client.HTTPConnection) -> None:
        while True:  # refused while the probe below held a slot: try again
            conn.request(
                "GET",
                f"/api/v1/calls/{call_id}?wait=30",
                headers={"Authorization": f"Bearer {token}"},
            )
            response = conn.getresponse()
            response.read()
            if response.status != 429:
                return
            time.sleep(0.05)

    threads = [threading.Thread(target=poll, daemon=True) for _ in range(POLLS)]
    for t in threads:
        t.start()
    probe = Agent(port, token)
    deadline = time.monotonic() + 30
    while (answer := probe.send("GET", "/tools"))[0] != 429:  # refused: all 64 are held
        if time.monotonic() > deadline:
            raise BenchError(f"the server never held agent A's 64 long-polls: {answer}")
        time.sleep(0.05)
    return threads


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200, help="of each kind (default 200)")
    parser.add_argument(
        "--unbounded-requests",
        type=int,
        default=20,
        help="of each kind against the process without bounds (default 20: each takes seconds)",
    )
    parser.add_argument(
        "--database-url",
        default=os.getenv("BENCH_ATTACK_DATABASE_URL", "postgres:///toolops_bench_attack"),
        help="dropped and created afresh",
    )
    o = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="toolops-attack-") as tmp, interrupts_as_exceptions():
        procs = Processes(Path(tmp))
        try:
            results = run(o, Path(tmp), procs)
        except BenchError as exc:
            print(f"bench/attack.py: {exc}\n{procs.error_logs()}", file=sys.stderr)
            raise SystemExit(1) from None
        finally:
            procs.stop_all()
    out = BENCH / "results" / "attack.json"
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {out.relative_to(ROOT)}")


def run(o: argparse.Namespace, tmp: Path, procs: Processes) -> dict[str, Any]:
    env = {
        **os.environ,
        "DATABASE_URL": o.database_url,
        "TOOLOPS_DATA_DIR": str(tmp / "data"),
        "TOOLOPS_TOOLS_FILE": str(tmp / "catalog.toml"),
        "DJANGO_DEBUG": "0",
        "DJANGO_SECRET_KEY": secrets.token_urlsafe(40),
        "TOOLOPS_LOG_LEVEL": "WARNING",
        "TOOLOPS_AGENT_MAX_INFLIGHT": str(POLLS),
        "PYTHONPATH": str(ROOT),
    }
    env.pop("DJANGO_SETTINGS_MODULE", None)
    env.pop("REDIS_URL", None)
    downstream, port, unbounded = free_ports(3)
    (tmp / "catalog.toml").write_text(CATALOG.format(url=f"http://{HOST}:{downstream}"))
    fresh_database(o.database_url)
    run_checked([PY, "manage.py", "migrate", "--noinput", "-v0"], env, "migrate")
    tokens = {}
    for name in ("agent-a", "agent-b", "agent-c"):
        argv = [PY, "manage.py", "create_agent", name, "--rate-limit", str(AGENT_RATE_LIMIT)]
        out = run_checked(argv, env, name)
        tokens[name] = out.strip().splitlines()[-1].strip()
    argv = [PY, str(BENCH / "downstream.py"), "--host", HOST, "--port", str(downstream)]
    procs.start("downstream", argv, env)
    wait_http(procs, "downstream", downstream, "/")
    procs.start("toolops", uvicorn_argv(TOOLOPS_APP, port, loop="uvloop"), env)
    wait_http(procs, "toolops", port, "/api/v1/schema/")

    a, b = Agent(port, tokens["agent-a"]), Agent(port, tokens["agent-b"])
    c = Agent(port, tokens["agent-c"])
    for agent, run_id in ((a, "r-a"), (b, "r-b"), (c, "r-c")):
        agent.send("POST", "/runs", {"run_id": run_id})
    status, held = a.send(
        "POST",
        "/runs/r-a/calls",
        {
            "step_index": 0,
            "tool": "bench_held",
            "args": {"n": 1},
        },
    )
    if held.get("status") != "pending_approval":
        raise BenchError(f"agent A's call is not held: {status} {held}")
    n = o.requests
    measure(b, 20, 10**6)  # warm-up
    at_rest = measure(b, n, 0)
    wide, wide_attack = under_wide_args(port, tokens["agent-c"], lambda: measure(b, n, 2 * n))
    hold_long_polls(port, tokens["agent-a"], held["call_id"])
    attacked = measure(b, n, n)

    # The same wide-args attack on a process with the widths and the work budget off.
    procs.start(
        "unbounded", uvicorn_argv(TOOLOPS_APP, unbounded, loop="uvloop"), {**env, **UNBOUNDED_ENV}
    )
    wait_http(procs, "unbounded", unbounded, "/api/v1/schema/")
    b2 = Agent(unbounded, tokens["agent-b"])
    measure(b2, 5, 10**7)  # warm-up
    before, before_attack = under_wide_args(
        unbounded, tokens["agent-c"], lambda: measure(b2, o.unbounded_requests, 3 * n)
    )
    wide_attack["b_reconnects"], before_attack["b_reconnects"] = b.reconnects, b2.reconnects
    report(at_rest, wide, wide_attack, attacked, before, before_attack, n)
    return {
        "requests": n,
        "long_polls": POLLS,
        "at_rest": at_rest,
        "attack": attacked,
        "wide_args": {**wide, "attacker": wide_attack},
        "wide_args_unbounded": {**before, "attacker": before_attack},
        "goal": {
            "wide_get_tools_p99_ms": WIDE_P99_GOAL_MS,
            "met": wide["get_tools"]["p99_ms"] < WIDE_P99_GOAL_MS,
        },
    }


def under_wide_args(port: int, token: str, measuring: Any) -> tuple[Any, dict[str, Any]]:
    """`measuring()` while agent C's wide-args attack is on; its figures and C's answers."""
    attack = WideAttack(port, token, "r-c")
    attack.start()
    try:
        figures = measuring()
    finally:
        attacker = attack.stop()
    return figures, attacker


def report(
    at_rest: dict[str, Any],
    wide: dict[str, Any],
    wide_attack: dict[str, Any],
    attacked: dict[str, Any],
    before: dict[str, Any],
    before_attack: dict[str, Any],
    count: int,
) -> None:
    print(f"\nFairness: agent B's latency, {count} of each request one after another")
    print(f"{'':52} {'n':>4} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}")
    states = (
        ("at rest", at_rest),
        ("C sends wide args", wide),
        (f"A holds {POLLS} long-polls", attacked),
        ("C sends wide args, no bounds", before),
    )
    for what, label in (("get_tools", "GET /api/v1/tools"), ("read_call", "read call")):
        for state, stats in states:
            s = stats[what]
            print(
                f"  {label:17} {state:32} {s['n']:4} {s['p50_ms']:8.2f} {s['p99_ms']:8.2f} "
                f"{s['max_ms']:8.2f}"
            )
    for label, attacker in (("bounds on", wide_attack), ("no bounds", before_attack)):
        print(
            f"  agent C ({label}): {attacker['requests']} wide bodies of "
            f"{attacker['body_bytes']:,} bytes in {attacker['per_s']:.1f}/s on "
            f"{attacker['streams']} streams, answered {attacker['statuses']}; B's "
            f"connection closed unanswered {attacker['b_reconnects']} times"
        )
    p99 = wide["get_tools"]["p99_ms"]
    met = "met" if p99 < WIDE_P99_GOAL_MS else "MISSED"
    print(
        f"  goal: B's GET /tools p99 during wide args < {WIDE_P99_GOAL_MS:g} ms: "
        f"{p99:.1f} ms, {met}"
    )


if __name__ == "__main__":
    main()
