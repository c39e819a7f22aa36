"""A Redis server of a test's own, on a port of its own: killed with SIGKILL and started
again empty on the same port (nothing is kept on disk), or never started at all (the
broker is down). Never the shared server other tests use."""

from __future__ import annotations

import shutil
import socket
import subprocess
from contextlib import suppress

import httpx
import pytest

from tests.conftest import free_port
from tests.waiting import wait_until

needs_redis_server = pytest.mark.skipif(
    shutil.which("redis-server") is None, reason="redis-server is not installed"
)


class RedisServer:
    def __init__(self) -> None:
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    def url(self, db: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_until(self.answers, 10, failure="redis-server did not start")

    def answers(self) -> bool:
        with suppress(OSError), socket.create_connection(("127.0.0.1", self.port), 0.5) as s:
            s.sendall(b"PING\r\n")
            return s.recv(16).startswith(b"+PONG")
        return False

    def kill(self) -> None:
        """SIGKILL: everything it held (queued messages, group memberships) is gone."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def restart(self) -> None:
        self.kill()
        self.start()


def timed(
    send: httpx.Client, method: str, url: str, **kwargs: object
) -> tuple[float, httpx.Response]:
    """How long one request took, and its answer."""
    response = send.request(method, url, **kwargs)  # type: ignore[arg-type]
    return response.elapsed.total_seconds(), response
