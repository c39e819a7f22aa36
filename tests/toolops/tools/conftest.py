"""Fixtures for the transport tests: a real downstream with answers as large as asked."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import write_catalog
from tests.toolops.tools.big import BigServer, big_tools
from toolops.tools import registry


@pytest.fixture
def big() -> Iterator[BigServer]:
    server = BigServer()
    yield server
    server.stop()


@pytest.fixture
def big_catalog(shop: Any, settings: Any, big: BigServer) -> Iterator[BigServer]:
    """The demo catalog (at the shop) plus big_report and big_import (at `big`)."""
    path = write_catalog(shop.url, big_tools(big.url))
    settings.TOOLOPS_TOOLS_FILE = str(path)
    registry.reset()
    yield big
    registry.reset()
    path.unlink(missing_ok=True)
