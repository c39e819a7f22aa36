"""The child processes of `manage.py demo`: started in their own process group with
their output in a log file, waited for until ready, watched, and stopped together —
SIGTERM first, SIGKILL after a grace period — whatever ends the demo."""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import httpx
from django.conf import settings
from django.core.management.base import CommandError

HOST = "127.0.0.1"
STOP_GRACE_S = 10.0
LOG_TAIL_LINES = 15
# The shop listens this far above the web server unless told otherwise.
SHOP_PORT_OFFSET = 1000
# Each port option's variable in `make demo` (the Makefile's demo target).
MAKE_VARS = {"port": "PORT", "shop-port": "SHOP_PORT"}


class Stop(BaseException):
    """Raised by the SIGINT/SIGTERM handler: unwinds to the shutdown from anywhere."""


class ChildDied(Exception):
    def __init__(self, child: Child) -> None:
        super().__init__(f"{child.name} exited unexpectedly ({child.exit_text})")
        self.child = child


@dataclass
class Child:
    name: str
    proc: subprocess.Popen[bytes]
    log_path: Path
    log_file: IO[bytes] = field(repr=False)
    log_start: int = 0  # where this run's output starts in the (appended) log

    @property
    def exit_text(self) -> str:
        code = self.proc.returncode
        if code is not None and code < 0:
            with suppress(ValueError):
                return f"killed by {signal.Signals(-code).name}"
        return f"exit code {code}"

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def log_text(self) -> str:
        """This run's output so far."""
        try:
            with self.log_path.open("rb") as fh:
                fh.seek(self.log_start)
                return fh.read().decode(errors="replace")
        except OSError:
            return ""

    def tail(self, lines: int = LOG_TAIL_LINES) -> list[str]:
        return self.log_text().splitlines()[-lines:]


# --- start-up checks ---------------------------------------------------------------------


def port_is_free(port: int) -> bool:
    with socket.socket() as sock:
        # As the servers themselves bind: a port left in TIME_WAIT by a previous run is free.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((HOST, port))
        except OSError:
            return False
    return True


def shop_port_for(port: int, shop_port: int | None) -> int:
    """The shop's port: as given, else the web server's + SHOP_PORT_OFFSET (8000 → 9000,
    8001 → 9001), so that two demos started with different ports do not clash."""
    if shop_port is not None:
        return shop_port
    derived = port + SHOP_PORT_OFFSET
    if derived > 65535:
        raise CommandError(
            f"--port {port} puts the demo shop on port {derived}, past 65535: pass "
            "--shop-port too (make demo SHOP_PORT=…)"
        )
    return derived


def next_free_port(port: int, taken: set[int]) -> int | None:
    """The first free port after `port` (a few tries), to suggest one that works."""
    for candidate in range(port + 1, min(port + 50, 65536)):
        if candidate not in taken and port_is_free(candidate):
            return candidate
    return None


def check_ports(ports: dict[str, int]) -> None:
    """Each port valid, distinct and free, before anything starts; a refusal names the
    port, its option, and a free one to pass instead."""
    for what, port in ports.items():
        if not 1 <= port <= 65535:
            raise CommandError(f"--{what} {port} is not a TCP port (1 to 65535)")
    seen: dict[int, str] = {}
    for what, port in ports.items():
        if port in seen:
            raise CommandError(f"--{seen[port]} and --{what} are both {port}: they must differ")
        seen[port] = what
    for what, port in ports.items():
        if port_is_free(port):
            continue
        free = next_free_port(port, set(ports.values()))
        instead = (
            f"pass another, e.g. --{what} {free} (make demo {MAKE_VARS[what]}={free})"
            if free is not None
            else f"pass another with --{what} (make demo {MAKE_VARS[what]}=…)"
        )
        raise CommandError(
            f"port {port} (--{what}) is busy on {HOST}: stop what listens there, or {instead}"
        )


def _die_with_parent() -> None:
    """In the child, before exec (Linux): SIGTERM when the launcher dies without
    stopping it, so a killed launcher leaves nothing behind."""
    with suppress(Exception):
        ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def start_child(name: str, args: list[str], env: dict[str, str], log_dir: Path) -> Child:
    log_path = log_dir / f"{name}.log"
    log_file = log_path.open("ab")
    log_start = log_file.tell()
    log_file.write(f"\n--- {time.strftime('%Y-%m-%d %H:%M:%S')} {' '.join(args)}\n".encode())
    log_file.flush()
    proc = subprocess.Popen(
        [sys.executable, *args],
        cwd=settings.BASE_DIR,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=log_file,
        stderr=subprocess.STDOUT,
        # Its own process group: a terminal's Ctrl-C reaches only the launcher, which
        # then stops the children itself, and a group kill takes their helpers too.
        process_group=0,
        preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
    )
    return Child(name, proc, log_path, log_file, log_start)


def wait_until(child: Child, ready: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not child.alive:
            raise ChildDied(child)
        if ready():
            return
        time.sleep(0.2)
    raise CommandError(f"{child.name} was not ready after {timeout_s:g} s ({what})")


def stays_up(child: Child, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not child.alive:
            raise ChildDied(child)
        time.sleep(0.1)


def log_contains(child: Child, *needles: str) -> Callable[[], bool]:
    def ready() -> bool:
        text = child.log_text()
        return any(n in text for n in needles)

    return ready


def url_answers(url: str) -> Callable[[], bool]:
    def ready() -> bool:
        try:
            return httpx.get(url, timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    return ready


def stop_children(children: list[Child], grace_s: float = STOP_GRACE_S) -> None:
    """SIGTERM to each child's process group, wait, then SIGKILL whatever is left."""
    for child in children:
        if child.alive:
            with suppress(ProcessLookupError, PermissionError):
                os.killpg(child.proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    for child in children:
        with suppress(subprocess.TimeoutExpired):
            child.proc.wait(max(0.1, deadline - time.monotonic()))
    for child in children:
        # The group too: a worker's embedded beat process must not outlive it.
        with suppress(ProcessLookupError, PermissionError):
            os.killpg(child.proc.pid, signal.SIGKILL)
        if child.alive:
            child.proc.wait(5)
        child.log_file.close()


# --- the command -------------------------------------------------------------------------
