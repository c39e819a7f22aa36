"""Fixtures for the metrics tests: a catalog that names the tools a test's rows use."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import DEMO_PREFIX, write_catalog
from toolops.tools import registry

Catalog = Callable[..., None]


@pytest.fixture(autouse=True)
def fresh_metrics(settings: Any) -> None:
    # These tests change rows between scrapes and read each scrape's totals: no answer
    # kept from the scrape before (test_metrics_cache.py tests the cache itself).
    settings.TOOLOPS_METRICS_CACHE_S = 0


@pytest.fixture
def catalog(settings: Any) -> Iterator[Catalog]:
    """`catalog("slow_tool", …)`: the demo catalog plus these read tools, loaded for this
    test. Metrics count a tool under its own name only when the catalog has it."""
    files: list[Path] = []

    def load(*names: str) -> None:
        extra = "".join(
            f'\n[[tool]]\nname = "{name}"\nkind = "read"\nurl = "{DEMO_PREFIX}/{name}"\n'
            'params_schema = { type = "object" }\n'
            for name in names
        )
        files.append(write_catalog(DEMO_PREFIX, extra))
        settings.TOOLOPS_TOOLS_FILE = str(files[-1])
        settings.TOOLOPS_POLICY_CACHE_S = 0
        registry.reset()

    yield load
    registry.reset()
    for file in files:
        file.unlink(missing_ok=True)
