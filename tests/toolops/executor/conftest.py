"""Fixtures for the executor behaviour tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Shop, write_catalog
from toolops.tools import registry


@pytest.fixture
def catalog(shop: Shop, settings: Any) -> Iterator[Callable[[str], Path]]:
    """`catalog(toml)`: the demo catalog pointed at the shop, plus extra tools. `{shop}`
    in the TOML is replaced by the shop's base URL."""
    written: list[Path] = []

    def use(overrides: str) -> Path:
        path = write_catalog(shop.url, overrides.replace("{shop}", shop.url))
        written.append(path)
        settings.TOOLOPS_TOOLS_FILE = str(path)
        registry.reset()
        return path

    yield use
    registry.reset()
    for path in written:
        path.unlink(missing_ok=True)
