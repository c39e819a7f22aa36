"""Kill a node (issue 19, item 3): under load through HAProxy, one web process and one
worker holding claims are SIGKILLed. The balancer routes around the dead web process, no
request made after it saw it DOWN fails, the dead worker's claims are swept while it is
still dead, both are started again and the web process rejoins; and the chaos checker
finds no call lost or doubled. The scenario runs in a process of its own
(tests/cluster/killnode.py); this test judges what it saw."""

from __future__ import annotations

import json
from pathlib import Path

from tests.chaos.runner import run_module
from tests.cluster.killnode import KILLED_WEB
from tests.cluster.topology import database_name


def test_a_killed_web_process_and_worker_lose_no_call(tmp_path: Path) -> None:
    found = tmp_path / "result.json"
    code, output = run_module(
        "tests.cluster.killnode",
        "--database",
        database_name("killnode"),
        "--workdir",
        str(tmp_path / "run"),
        "--json",
        str(found),
        timeout=600,
    )
    assert code == 0, output
    result = json.loads(found.read_text())

    # The balancer saw the dead process DOWN, the others UP, and sent it nothing more:
    # no request made after that failed (those in flight on it were retried, same key).
    assert result["states_while_down"] == {"web1": "UP", "web2": "DOWN", "web3": "UP"}
    assert result["failed_after_down"] == [], result["failed_after_down"]
    # The claims the dead worker held were taken over (the fence grew) and settled.
    assert result["held"], result
    for key, claim in result["held"].items():
        assert claim["state"] == "recorded" and claim["fence"] >= 2, (key, claim)
    # Both started again; the web process is UP and serving.
    assert result["states_after_restart"][KILLED_WEB] == "UP", result["states_after_restart"]
    assert result["worker_back"], result
    # No call lost or doubled, no claim left, every indeterminate answer resolved.
    assert result["violations"] == [], "\n".join(result["violations"])
    assert result["quiet"], result
    assert result["counts"]["ok"] > 100, result["counts"]
