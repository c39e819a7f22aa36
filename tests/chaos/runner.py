"""What the runners of a whole stack share (`python -m tests.chaos`, `python -m
tests.scale`, tests/cluster/killnode.py): their common arguments, checked, and the end of
a load — the clients told to stop, their retries of what is still indeterminate given
`retry_s` more, and every client thread waited for."""

from __future__ import annotations

import argparse
import logging
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any


def add_run_arguments(parser: argparse.ArgumentParser, db_name: str) -> None:
    parser.add_argument("--workdir", type=Path, default=None, help="logs and history here")
    parser.add_argument(
        "--database", default=db_name, help=f"the database to create afresh ({db_name})"
    )
    parser.add_argument("--json", type=Path, default=None, help="write the summary here too")


def checked(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.Namespace:
    """`args` with a seed drawn when none was given; a bad length or database name is
    refused by the parser, naming it."""
    if args.seconds < 10:
        parser.error(f"--seconds must be at least 10, got {args.seconds:g}")
    if not re.fullmatch(r"[a-z_][a-z0-9_]{0,62}", args.database):
        parser.error(f"--database must be a plain lower-case name, got {args.database!r}")
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(1, 10**6)
    return args


def load_for(seconds: float, threads: Iterable[threading.Thread]) -> None:
    """The load's length: `seconds`, or less once every client thread has ended (they end
    early only when the run broke)."""
    deadline = time.monotonic() + seconds
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))


def wind_down(
    clients: Iterable[Any],
    threads: Iterable[threading.Thread],
    review: threading.Thread,
    agents_done: threading.Event,
    retry_s: float,
) -> None:
    """After the load's stop event is set: each client retries what is still
    indeterminate for `retry_s` more, then the agents' threads and the reviewer's end."""
    for client in clients:
        client.give_up_at = time.monotonic() + retry_s
    for t in threads:
        t.join(retry_s + 150)
    agents_done.set()
    review.join(retry_s + 30)


def interrupted(signum: int, frame: Any) -> None:
    """SIGTERM as Ctrl-C: unwind to the clean-up of every process started."""
    raise KeyboardInterrupt


def begin(args: argparse.Namespace, name: str) -> Path:
    """The run's directory (made, under /tmp unless --workdir), with SIGTERM and SIGINT
    unwinding to the clean-up and httpx's request log quiet."""
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix=f"toolops-{name}-"))
    workdir.mkdir(parents=True, exist_ok=True)
    # Both, explicitly: a runner started in the background inherits SIGINT ignored.
    signal.signal(signal.SIGTERM, interrupted)
    signal.signal(signal.SIGINT, interrupted)
    logging.getLogger("httpx").setLevel(logging.WARNING)
    return workdir


def run_module(module: str, *args: str, timeout: float = 900) -> tuple[int, str]:
    """`python -m module args…` from the project's root, outside pytest's Django (for the
    tests that run a whole runner): its exit status and the tail of its output."""
    root = Path(__file__).resolve().parents[2]
    env = {k: v for k, v in os.environ.items() if not k.startswith("DJANGO_SETTINGS")}
    done = subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=root,
        env={**env, "PYTHONPATH": str(root)},
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return done.returncode, done.stdout[-6000:] + done.stderr[-6000:]
