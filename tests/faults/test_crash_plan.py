"""TOOLOPS_CRASH_AT (toolops/crash.py): what it accepts, what it refuses and how it says
so, a crash point that is a no-op when unset, a real SIGKILL when armed, and the system
check that tells a deployment it is set."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.core import checks
from django.core.exceptions import ImproperlyConfigured

from tests.toolops.test_settings import run_manage
from toolops import crash
from toolops.crash import POINTS, crash_plan, crash_point

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ("toolops", "compensations", "traces")


def test_it_reads_names_and_probabilities() -> None:
    assert crash_plan("") == {}
    assert crash_plan(" , ") == {}
    assert crash_plan("after-claim") == {"after-claim": 1.0}
    assert crash_plan(" mid-sweep@0.25 , after-answer@1") == {
        "mid-sweep": 0.25,
        "after-answer": 1.0,
    }


@pytest.mark.parametrize(
    ("raw", "named"),
    [
        ("after-clam", "'after-clam'"),
        ("after-claim,midsweep", "'midsweep'"),
        ("@0.5", "''"),
        ("AFTER-CLAIM", "'AFTER-CLAIM'"),
    ],
)
def test_it_refuses_an_unknown_point_naming_it_and_listing_the_points(raw: str, named: str) -> None:
    with pytest.raises(ImproperlyConfigured) as refused:
        crash_plan(raw)
    message = str(refused.value)
    assert f"TOOLOPS_CRASH_AT names an unknown crash point {named};" in message
    assert f"the crash points are: {', '.join(POINTS)}" in message


@pytest.mark.parametrize("chance", ["0", "-0.1", "1.5", "nan", "inf", "half", ""])
def test_it_refuses_a_probability_outside_0_to_1(chance: str) -> None:
    with pytest.raises(ImproperlyConfigured) as refused:
        crash_plan(f"after-claim,mid-sweep@{chance}")
    message = str(refused.value)
    assert f"'mid-sweep@{chance}'" in message
    assert "must be a number above 0 and at most 1" in message
    assert repr(chance) in message


def test_a_process_refuses_to_start_with_a_bad_crash_point(tmp_path: Path) -> None:
    result = run_manage("check", TOOLOPS_CRASH_AT="after-lunch", TOOLOPS_DATA_DIR=str(tmp_path))
    assert result.returncode != 0
    assert "TOOLOPS_CRASH_AT names an unknown crash point 'after-lunch'" in result.stderr


def test_a_process_started_with_crash_points_says_so_and_the_check_warns(tmp_path: Path) -> None:
    result = run_manage(
        "check",
        TOOLOPS_CRASH_AT="after-claim,mid-sweep@0.5",
        DJANGO_DEBUG="0",
        TOOLOPS_DATA_DIR=str(tmp_path),
    )
    assert result.returncode == 0, result.stderr
    output = result.stdout + result.stderr
    assert "toolops: crash points armed (TOOLOPS_CRASH_AT): after-claim@1, mid-sweep@0.5" in output
    assert "toolops.W011" in output
    assert "kills itself (SIGKILL) at the crash points after-claim, mid-sweep" in output


def test_a_crash_point_is_a_no_op_when_unset() -> None:
    assert crash._armed is None  # the test run sets no TOOLOPS_CRASH_AT
    for name in POINTS:
        crash_point(name)
    crash.arm({})
    assert crash._armed is None


def test_every_crash_point_in_the_code_is_a_known_one_and_each_is_placed_once() -> None:
    placed: list[str] = []
    for package in SOURCES:
        for path in (ROOT / package).rglob("*.py"):
            if path.name == "crash.py":
                continue  # its own docstring shows one
            placed += re.findall(r'crash_point\("([^"]+)"\)', path.read_text())
    assert sorted(placed) == sorted(POINTS)


CHILD = """
import sys
from toolops import crash
crash.arm(crash.crash_plan(sys.argv[1]), seed=int(sys.argv[2]))
hits = 0
for _ in range(1000):
    crash.crash_point("after-answer")  # not armed: never fires
    crash.crash_point("mid-sweep")
    hits += 1
    print(hits, flush=True)
print("survived", flush=True)
"""


def run_child(plan: str, seed: int = 7) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", CHILD, plan, str(seed)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_an_armed_point_kills_the_process_by_sigkill_at_its_first_hit() -> None:
    result = run_child("mid-sweep")
    assert result.returncode == -signal.SIGKILL
    assert result.stdout == ""  # killed at the first hit, before anything after it
    assert "toolops: crash points armed (TOOLOPS_CRASH_AT): mid-sweep@1" in result.stderr
    assert re.search(r"toolops: crash point mid-sweep reached; killing process \d+", result.stderr)


def test_a_probability_fires_at_a_hit_the_seed_repeats() -> None:
    first, again = run_child("mid-sweep@0.1", seed=3), run_child("mid-sweep@0.1", seed=3)
    assert first.returncode == again.returncode == -signal.SIGKILL
    hits = len(first.stdout.split())
    assert hits == len(again.stdout.split())  # the same hit, with the same seed
    assert 0 < hits < 1000  # not the first hit, not never
    assert "survived" not in first.stdout


def test_the_system_check_warns_when_crash_points_are_set_without_debug(settings: Any) -> None:
    def warnings() -> list[str]:
        return [m.id for m in checks.run_checks(tags=["toolops"]) if m.id == "toolops.W011"]

    assert warnings() == []
    settings.TOOLOPS_CRASH_AT = {"after-claim": 1.0}
    settings.DEBUG = False
    assert warnings() == ["toolops.W011"]
    settings.DEBUG = True
    assert warnings() == []
