"""bench/profile.py's stages: a function's self time goes to its module's stage, a C or
standard-library function's to its callers', the profiler's cost comes off, and the
stages add up to the total."""

from __future__ import annotations

import pytest

from bench.profile_groups import (
    OTHER,
    PROFILER,
    Overhead,
    attribute,
    corrected,
    module_of,
    stage_of_module,
    top_functions,
)

SITE = "/venv/lib/python3.11/site-packages"
SRC = "/src"
ROOTS = [SITE, SRC, "/py/lib/python3.11"]

VIEW = (f"{SRC}/toolops/api/views.py", 10, "post")
CLAIM = (f"{SRC}/toolops/executor/claims.py", 5, "claim")
DRF = (f"{SITE}/rest_framework/request.py", 20, "data")
ISINSTANCE = ("~", 0, "<built-in method builtins.isinstance>")
UVLOOP = ("~", 0, "<method 'run_until_complete' of 'uvloop.loop.Loop' objects>")
COPY = ("/py/lib/python3.11/copy.py", 128, "deepcopy")
MINE = (f"{SITE}/somelib/thing.py", 3, "work")
TIMER = (f"{SRC}/bench/profiled.py", 80, "wrapper")


def entry(calls: int, tottime: float, callers: dict | None = None) -> tuple:
    # pstats: (primitive calls, calls, self time, cumulative time, callers); a caller's
    # entry: (calls, primitive calls, self time of these calls, cumulative time).
    return (calls, calls, tottime, tottime, callers or {})


def test_a_module_name_comes_from_its_file_under_the_longest_root() -> None:
    assert module_of(VIEW, ROOTS) == "toolops.api.views"
    assert module_of((f"{SITE}/django/db/__init__.py", 1, "x"), ROOTS) == "django.db"
    assert module_of(UVLOOP, ROOTS) == "uvloop.loop.Loop"
    assert module_of(ISINSTANCE, ROOTS) == "builtins.isinstance"
    assert module_of(("<frozen importlib._bootstrap>", 1, "x"), ROOTS) == "importlib._bootstrap"
    assert module_of(("<string>", 2, "__init__"), ROOTS) is None


@pytest.mark.parametrize(
    ("module", "stage"),
    [
        ("toolops.executor.claims", "toolops.executor.claims"),
        ("toolops.api.parsers", "body parsing / JSON"),
        ("toolops.api.views", "ToolOps API (toolops.api.*)"),
        ("rest_framework.request", "DRF (request, auth, serializers, response)"),
        ("psycopg_binary._psycopg", "database driver (psycopg)"),
        ("django.db.models.base", "Django ORM (django.db)"),
        ("django.urls.resolvers", "Django (request, URLs, signals, utils)"),
        ("bench.profiled", PROFILER),
        ("toolopsx.thing", None),  # a prefix matches whole names only
        ("copy", None),
    ],
)
def test_a_module_belongs_to_the_first_stage_naming_it(module: str, stage: str | None) -> None:
    assert stage_of_module(module) == stage


def test_self_times_go_to_stages_and_add_up_to_the_total_without_the_profiler() -> None:
    stats = {
        VIEW: entry(1, 0.010),
        CLAIM: entry(1, 0.020, {VIEW: (1, 1, 0.020, 0.020)}),
        DRF: entry(2, 0.004, {VIEW: (2, 2, 0.004, 0.004)}),
        # isinstance: 3 ms from the claim, 1 ms from DRF; deepcopy all from DRF.
        ISINSTANCE: entry(4, 0.004, {CLAIM: (3, 3, 0.003, 0.003), DRF: (1, 1, 0.001, 0.001)}),
        COPY: entry(1, 0.002, {DRF: (1, 1, 0.002, 0.002)}),
        UVLOOP: entry(1, 0.005),
        MINE: entry(1, 0.001),
        TIMER: entry(4, 0.050),
    }
    stages, total = attribute(stats, ROOTS)
    found = dict(stages)
    assert found["toolops.executor.claims"] == pytest.approx(0.023)
    assert found["DRF (request, auth, serializers, response)"] == pytest.approx(0.007)
    assert found["ToolOps API (toolops.api.*)"] == pytest.approx(0.010)
    assert found["server (uvicorn, httptools, uvloop, asyncio)"] == pytest.approx(0.005)
    assert found[OTHER] == pytest.approx(0.001)
    assert PROFILER not in found
    assert total == pytest.approx(0.046)
    assert sum(found.values()) == pytest.approx(total)
    assert [name for name, _ in stages][0] == "toolops.executor.claims"  # largest first


def test_the_profilers_cost_comes_off_each_function_by_its_calls_and_the_calls_it_made() -> None:
    stats = {
        VIEW: entry(1, 0.010),
        DRF: entry(2, 0.004, {VIEW: (2, 2, 0.004, 0.004)}),
    }
    fixed = corrected(stats, Overhead(callee_s=0.001, caller_s=0.002))
    assert fixed[VIEW][2] == pytest.approx(0.010 - 0.001 - 2 * 0.002)
    assert fixed[DRF][2] == pytest.approx(0.004 - 2 * 0.001)
    assert fixed[DRF][4][VIEW][2] == pytest.approx(0.002)
    never_negative = corrected(stats, Overhead(callee_s=1.0, caller_s=1.0))
    assert never_negative[VIEW][2] == 0.0


def test_the_top_functions_are_by_self_time_without_the_profilers() -> None:
    stats = {VIEW: entry(1, 0.010), CLAIM: entry(3, 0.020), TIMER: entry(1, 0.5)}
    top = top_functions(stats, ROOTS, 5)
    assert [row["function"] for row in top] == [
        "toolops.executor.claims:5(claim)",
        "toolops.api.views:10(post)",
    ]
    assert top[0]["calls"] == 3
