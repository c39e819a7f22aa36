"""Shared test fixtures: personas, a real downstream shop over HTTP, a real ToolOps
server process, and the catalog pointed at the shop."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.conf import settings
from rest_framework.test import APIClient

from tests.otlp import otlp_grpc, otlp_http  # noqa: F401 - fixtures, for every test
from tests.waiting import wait_until
from toolops.demo.shop import start_shop
from toolops.models import Agent
from toolops.services import agent_create
from toolops.tools import registry

ROOT = Path(__file__).resolve().parent.parent
DEMO_CATALOG = ROOT / "toolops" / "demo" / "catalog.toml"
DEMO_PREFIX = "http://127.0.0.1:9000"


class Shop:
    """The demo downstream, on its own port, driven through its control API."""

    def __init__(self, base_url: str) -> None:
        self.url = base_url
        self.http = httpx.Client(base_url=base_url, timeout=10)

    def requests(self, path: str | None = None) -> list[dict[str, Any]]:
        params = {"path": path} if path else None
        return self.http.get("/_shop/requests", params=params).json()["requests"]

    def state(self) -> dict[str, Any]:
        return self.http.get("/_shop/state").json()

    def fault(self, path: str, **fault: Any) -> None:
        response = self.http.post("/_shop/faults", json={"path": path, **fault})
        response.raise_for_status()

    def reset(self) -> None:
        self.http.post("/_shop/reset").raise_for_status()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One Chromium per test module (tests/browser.py `chromium`), imported only where a
    test asks for it: tests/browser.py lets the ORM run beside Playwright's loop."""
    from tests.browser import chromium

    with chromium() as launched:
        yield launched


@pytest.fixture(scope="session")
def shop_server() -> Iterator[Shop]:
    server, base_url = start_shop(port=0)
    yield Shop(base_url)
    server.shutdown()


def write_catalog(shop_url: str, overrides: str = "") -> Path:
    """The demo catalog with its URLs pointed at `shop_url`, plus extra TOML."""
    text = DEMO_CATALOG.read_text().replace(DEMO_PREFIX, shop_url) + "\n" + overrides
    fd, name = tempfile.mkstemp(suffix=".toml", prefix="catalog-")
    os.close(fd)
    Path(name).write_text(text)
    return Path(name)


@pytest.fixture
def shop(shop_server: Shop, settings: Any) -> Iterator[Shop]:
    """A clean shop, and the demo catalog pointed at it for this test."""
    shop_server.reset()
    catalog = write_catalog(shop_server.url)
    settings.TOOLOPS_TOOLS_FILE = str(catalog)
    settings.TOOLOPS_POLICY_CACHE_S = 0
    registry.reset()
    yield shop_server
    registry.reset()
    catalog.unlink(missing_ok=True)


@pytest.fixture
def agent_a(db: None) -> tuple[Agent, str]:
    return agent_create(name="agent-a")


@pytest.fixture
def agent_b(db: None) -> tuple[Agent, str]:
    return agent_create(name="agent-b")


@pytest.fixture
def api(agent_a: tuple[Agent, str]) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {agent_a[1]}")
    return client


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ToolOpsServer:
    """A real ToolOps web process (uvicorn, ASGI) on the test database."""

    def __init__(self, env: dict[str, str]) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "uvicorn",
                "toolops.asgi:application",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--log-level",
                "warning",
                # Forwarded headers are toolops.proxies' to judge (TOOLOPS_TRUSTED_PROXIES).
                "--no-proxy-headers",
            ],
            cwd=ROOT,
            env=env,
        )
        wait_until(self.answers, 60, every=0.1, failure="the ToolOps server did not start")

    def answers(self) -> bool:
        try:
            httpx.get(f"{self.url}/healthz", timeout=1).raise_for_status()
            return True
        except httpx.HTTPError:
            if self.proc.poll() is not None:
                raise RuntimeError("ToolOps server exited during start-up") from None
            return False

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()


def server_env(**extra: str) -> dict[str, str]:
    """Environment for a ToolOps process that shares this test's database."""
    from django.db import connection

    db = connection.settings_dict
    env = {k: v for k, v in os.environ.items() if not k.startswith("DJANGO_SETTINGS")}
    if db["ENGINE"].endswith("postgresql"):
        user = f"{db['USER']}@" if db.get("USER") else ""
        host = db.get("HOST") or ""
        port = f":{db['PORT']}" if db.get("PORT") else ""
        env["DATABASE_URL"] = f"postgres://{user}{host}{port}/{db['NAME']}"
    else:
        env["DATABASE_URL"] = f"sqlite:///{db['NAME']}"
    env["TOOLOPS_TOOLS_FILE"] = settings.TOOLOPS_TOOLS_FILE
    env["TOOLOPS_POLICY_CACHE_S"] = "0"
    # One vault for every process of the test, whatever its data directory.
    env["TOOLOPS_ARGS_KEYS"] = ",".join(settings.TOOLOPS_ARGS_KEYS)
    # One secret key, as one deployment's processes share it: what one signs (a session, a
    # notification's link) another reads.
    env["DJANGO_SECRET_KEY"] = settings.SECRET_KEY
    env.update(extra)
    return env


@pytest.fixture
def toolops_server(transactional_db: None, shop: Shop) -> Iterator[Any]:
    """Start real ToolOps servers: `toolops_server(**env)` → ToolOpsServer."""
    servers: list[ToolOpsServer] = []

    def start(**extra: str) -> ToolOpsServer:
        server = ToolOpsServer(server_env(**extra))
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


@pytest.fixture
def worker(transactional_db: None, shop: Shop, tmp_path: Path) -> Iterator[Any]:
    """Start real Celery workers: `worker(**env)` → tests.worker.Worker. Every worker of a
    test shares one data directory, hence one broker (a restarted worker reads the queue
    its predecessor left)."""
    from tests.worker import Worker  # it imports this module

    started: list[Worker] = []

    def start(**env: str) -> Worker:
        w = Worker(tmp_path / "var", **env)
        started.append(w)
        return w

    yield start
    # Stopped before the test database is flushed.
    for w in started:
        w.stop()
