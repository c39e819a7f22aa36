"""Helpers for driving `manage.py demo` as a real process in tests."""

from __future__ import annotations

import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from contextlib import suppress
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Settings the launcher must not inherit from the test run: it uses its own data dir.
FOREIGN_ENV = ("DATABASE_URL", "TOOLOPS_TOOLS_FILE", "CELERY_BROKER_URL", "REDIS_URL")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def demo_env(data_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in FOREIGN_ENV}
    env["TOOLOPS_DATA_DIR"] = str(data_dir)
    env["DJANGO_SETTINGS_MODULE"] = "toolops.settings"
    env["PYTHONUNBUFFERED"] = "1"
    return env


def manage(*args: str) -> list[str]:
    return [sys.executable, str(ROOT / "manage.py"), *args]


class Launcher:
    """`manage.py demo …` with its output read line by line on a thread."""

    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            manage("demo", *args),
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            encoding="utf-8",
        )
        self.lines: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    @property
    def output(self) -> str:
        return "\n".join(self.lines)

    def wait_for(self, text: str, timeout_s: float) -> str:
        """The first line containing `text`; AssertionError with the output otherwise."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                line = self._queue.get(timeout=0.2)
            except queue.Empty:
                continue
            if line is None:
                raise AssertionError(f"the launcher exited before {text!r}:\n{self.output}")
            self.lines.append(line)
            if text in line:
                return line
        raise AssertionError(f"no {text!r} within {timeout_s:g} s:\n{self.output}")

    def drain(self, timeout_s: float = 5.0) -> None:
        """Collect the output that is left once the process has ended."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                line = self._queue.get(timeout=0.2)
            except queue.Empty:
                continue
            if line is None:
                return
            self.lines.append(line)

    def children(self) -> dict[str, int]:
        """From the `children: shop=1 web=2 worker=3` line."""
        line = next(x for x in self.lines if x.startswith("children:"))
        return {name: int(pid) for name, pid in re.findall(r"(\w+)=(\d+)", line)}

    def password(self, username: str) -> str:
        for line in self.lines:
            parts = line.split()
            if len(parts) >= 2 and parts[0] == username:
                return parts[1]
        raise AssertionError(f"no password printed for {username}:\n{self.output}")

    def kill_all(self) -> None:
        """Last resort after a failed test: nothing may be left running."""
        pids = []
        with suppress(StopIteration):
            pids = list(self.children().values())
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        for pid in pids:
            with suppress(OSError):
                os.killpg(pid, signal.SIGKILL)


def pid_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def processes_with_env(name: str, value: str) -> list[int]:
    """Pids whose environment holds name=value (Linux /proc; [] elsewhere)."""
    needle = f"{name}={value}".encode()
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        with suppress(OSError):
            if needle in (entry / "environ").read_bytes().split(b"\0"):
                found.append(int(entry.name))
    return found


def assert_until_in_utc(line: str) -> None:
    """The circuit_open feedback names the time the tool is tried again, with its zone."""
    until = re.search(r"unavailable until (\S+?):? ", line)
    assert until, line
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(Z|[+-]\d\d:\d\d)", until[1]), line
