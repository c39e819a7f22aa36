"""The Redis the tests may use: TOOLOPS_TEST_REDIS_URL, one database per pytest-xdist
worker so that workers running side by side never see (or empty) each other's keys,
queues and channel groups. Worker gwN uses the given database + N: with `-n 3` and
`.../13` that is 13, 14 and 15. Read at import time by test modules, so it imports
nothing of ToolOps."""

from __future__ import annotations

import os
from urllib.parse import urlsplit, urlunsplit

DATABASES = 16  # Redis' default `databases`


def worker_index() -> int:
    """0 for gw0 (or a run without xdist), 1 for gw1, …"""
    name = os.environ.get("PYTEST_XDIST_WORKER", "")
    return int(name[2:]) if name.startswith("gw") else 0


def redis_url() -> str:
    """This worker's Redis URL, or "" when TOOLOPS_TEST_REDIS_URL is not set."""
    base = os.environ.get("TOOLOPS_TEST_REDIS_URL", "")
    if not base:
        return ""
    parts = urlsplit(base)
    path = parts.path.strip("/") or "0"
    if not path.isdigit():
        raise ValueError(f"TOOLOPS_TEST_REDIS_URL must end in a database number: {base}")
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 1)
    if int(path) + workers > DATABASES:
        raise ValueError(
            f"TOOLOPS_TEST_REDIS_URL names database {path}, and {workers} test workers use it "
            f"and the next {workers - 1}: past Redis' {DATABASES} databases; give a lower one"
        )
    return urlunsplit(parts._replace(path=f"/{int(path) + worker_index()}"))
