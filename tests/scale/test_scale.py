"""A short scale run as part of the suite: the production topology (HAProxy in front of
3 web processes, 3 workers and beat on Redis, PostgreSQL behind pgbouncer in transaction
mode, the demo shop) under the mixed load for 30 s; every invariant must hold, and the
load must have gone through every web process."""

from __future__ import annotations

import json
import os
from pathlib import Path

from tests.chaos.runner import run_module

SECONDS = 30


def scale_database() -> str:
    """A database of this test's own, next to the suite's (DATABASE_URL's name)."""
    name = os.environ.get("DATABASE_URL", "postgres:///toolops").rsplit("/", 1)[1]
    return f"{name or 'toolops'}_scale"


def test_a_scale_run_spreads_over_three_web_processes_and_holds_every_invariant(
    tmp_path: Path,
) -> None:
    summary = tmp_path / "summary.json"
    code, output = run_module(
        "tests.scale",
        "--seconds",
        str(SECONDS),
        "--seed",
        "3",
        "--database",
        scale_database(),
        "--workdir",
        str(tmp_path / "run"),
        "--json",
        str(summary),
    )
    assert code == 0, output
    result = json.loads(summary.read_text())
    assert result["violations"] == [], output
    # Through the balancer, to all three web processes, every one of them up.
    servers = result["balancer"]
    assert sorted(servers) == ["web1", "web2", "web3"], servers
    for name, server in servers.items():
        assert server["status"] == "UP", (name, server)
        assert server["responses"]["2xx"] > 20, (name, server)
    # The mixed load happened: writes, replays of lost answers, approvals, a breaker
    # that refused, MCP calls answered.
    latency = result["latency"]
    for kind in ("write", "replay", "approval wait", "breaker call", "mcp call"):
        assert latency.get(kind, {}).get("n", 0) > 0, (kind, latency)
    assert result["breaker"]["refused"] > 0, result["breaker"]
    assert result["world"]["effects"] > 10, result["world"]
    # Every process of the topology was measured.
    for name in ("haproxy", "pgbouncer", "redis", "web1", "web2", "web3", "worker1", "beat"):
        assert result["memory"][name]["rss_mib"] > 0, (name, result["memory"])
