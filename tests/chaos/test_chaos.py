"""A short chaos run as part of the suite: the whole stack (two web processes, two
workers, beat, PostgreSQL, Redis and the shop behind fault proxies) under a fixed seed's
fault schedule — the broker down, Redis restarted, PostgreSQL restarted, the shop's
connections half-open and refused, the shop slow and losing answers after committing,
crash points in a web process — and every invariant must hold after it."""

from __future__ import annotations

import json
import os
from pathlib import Path

from tests.chaos.runner import run_module

SEED = 7  # its 45 s schedule: nine faults of eight kinds (python -m tests.chaos prints them)
SECONDS = 45


def chaos_database() -> str:
    """A database of this test's own, next to the suite's (DATABASE_URL's name)."""
    name = os.environ.get("DATABASE_URL", "postgres:///toolops").rsplit("/", 1)[1]
    return f"{name or 'toolops'}_chaos"


def test_a_chaos_run_holds_every_invariant(tmp_path: Path) -> None:
    summary = tmp_path / "summary.json"
    code, output = run_module(
        "tests.chaos",
        "--seconds",
        str(SECONDS),
        "--seed",
        str(SEED),
        "--database",
        chaos_database(),
        "--workdir",
        str(tmp_path / "run"),
        "--json",
        str(summary),
    )
    assert code == 0, output
    result = json.loads(summary.read_text())
    assert result["violation"] is None, output
    assert result["quiet"], output
    # The faults happened, and so did the work they hit.
    assert len(result["faults"]) >= 5, result["faults"]
    assert result["counts"]["ok"] > 100, result["counts"]
    assert result["world"]["effects"] > 20, result["world"]
