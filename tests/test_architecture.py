"""The import contract (pyproject.toml [tool.importlinter], docs/architecture.md) holds,
and it catches what it is there to catch: each rule broken once, in a copy of the tree."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LINT = [sys.executable, "-c", "from importlinter.cli import lint_imports_command as c; c()"]


def lint(where: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*LINT, "--no-cache"], cwd=where, capture_output=True, text=True, timeout=300
    )


def test_the_house_keeps_its_import_contract() -> None:
    done = lint(ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "4 kept, 0 broken" in done.stdout


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the product's packages, the contract and its contract type."""
    copy = tmp_path_factory.mktemp("tree")
    skip = shutil.ignore_patterns("__pycache__", "*.pyc", "static", "templates")
    for package in ("toolops", "compensations", "traces"):
        shutil.copytree(ROOT / package, copy / package, ignore=skip)
    (copy / "tests").mkdir()
    for name in ("__init__.py", "architecture.py"):
        shutil.copy(ROOT / "tests" / name, copy / "tests" / name)
    shutil.copy(ROOT / "pyproject.toml", copy / "pyproject.toml")
    return copy


def broken(tree: Path, edits: dict[str, str]) -> str:
    """Lint the tree with `edits` (path → a line added at its end), then undo them; the
    lint's report, which must say it failed."""
    before = {path: (tree / path).read_text() for path in edits}
    try:
        for path, line in edits.items():
            (tree / path).write_text(before[path] + f"\n{line}\n")
        done = lint(tree)
    finally:
        for path, text in before.items():
            (tree / path).write_text(text)
    assert done.returncode == 1, done.stdout + done.stderr
    return done.stdout


def test_a_lower_layer_importing_a_higher_one_is_caught(tree: Path) -> None:
    report = broken(tree, {"toolops/executor/gate.py": "from toolops.api import views"})

    assert "Layers: interfaces > workflows > executor > tools and recording > models BROKEN" in (
        report
    )
    assert "toolops.executor is not allowed to import toolops.api" in report
    assert "toolops.executor.gate -> toolops.api.views" in report


def test_a_module_of_the_executor_imported_from_outside_is_caught(tree: Path) -> None:
    report = broken(tree, {"toolops/services.py": "from toolops.executor import pipeline"})

    assert "is called through its face (toolops/executor/__init__.py) only BROKEN" in report
    assert "toolops.services" in report and "toolops.executor.pipeline" in report


def test_django_in_the_client_is_caught(tree: Path) -> None:
    report = broken(tree, {"toolops/client/calls.py": "import django"})

    assert "The client and the adapters import neither Django" in report
    assert "toolops.client is not allowed to import django" in report
    assert "toolops.client.calls -> django" in report


def test_an_import_cycle_is_caught(tree: Path) -> None:
    report = broken(
        tree, {"toolops/ids.py": "import toolops.rows", "toolops/rows.py": "import toolops.ids"}
    )

    assert "No import cycle between modules BROKEN" in report
    assert "toolops.ids -> toolops.rows" in report and "toolops.rows -> toolops.ids" in report


FRESH_PROCESS = """
import os, sys
import django
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "toolops.settings")
django.setup()
import toolops.asgi  # a web process, which never imports a tasks module itself
from toolops import queue
before = [m for m in ("toolops.tasks", "compensations.tasks") if m in sys.modules]
for name in (queue.COMPENSATE_RUN, queue.EXECUTE_APPROVED_CALL):
    module, _, attr = name.rpartition(".")
    task = queue.task(name)
    assert task.name == name, task.name
    assert task is getattr(sys.modules[module], attr)._get_current_object(), name
print("found", before)
"""


def test_a_task_enqueued_by_name_is_found_in_a_process_that_never_imported_it() -> None:
    done = subprocess.run(
        [sys.executable, "-c", FRESH_PROCESS],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    # Nothing had imported the task modules: the registry did, by the names alone.
    assert done.stdout.strip() == "found []"


def test_importing_the_client_and_the_adapters_loads_neither_django_nor_celery() -> None:
    code = (
        "import sys\n"
        "import toolops.client, toolops.adapters.openai, toolops.adapters.anthropic\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('django', 'celery', 'compensations', 'traces') or m.startswith('toolops.') "
        "and not m.startswith(('toolops.client', 'toolops.adapters'))))"
    )
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
