"""The cluster every test of a file shares: started once per module (a start costs some
20 s), stopped after its last test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.cluster.topology import Cluster, database_name


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """Three web processes behind HAProxy, one worker, beat, Redis and PostgreSQL."""
    found = Cluster(tmp_path_factory.mktemp("cluster"), db_name=database_name("cluster"))
    found.start()
    yield found
    found.stop()
