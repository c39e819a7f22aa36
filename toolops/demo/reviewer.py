"""The demo's scripted reviewer: approves, as the demo's `reviewer` login, every pending
approval of a run whose metadata says ``{"demo_reviewer": "auto"}``.

The resilience scenarios (a lost response, a charge that times out, a saga undone…) call
create_order and charge, which wait for a person since the approval gate is enforced.
Their runs carry that metadata so that they still run through; the approval scenarios'
runs do not, and wait for a person in the console. The decision goes through
`approval_decide`, as a person's does: it is a vote, an audit entry, and the worker
executes the approved call.

It runs as a process of its own, started by `manage.py demo` next to the web server and
the worker, and by the demo tests:

    python -m toolops.demo.reviewer [--username reviewer] [--interval 0.25]

A process, not a thread of its caller, because an approval's on-commit message must reach
the worker through the broker of the web server's data directory (TOOLOPS_DATA_DIR): a
process started with the web server's environment has exactly that. SIGTERM or Ctrl-C
stops it between two looks.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
from types import FrameType
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser

    from toolops.models import Approval

# What a run's metadata says to have its approvals decided by this script.
METADATA_KEY = "demo_reviewer"
AUTO = "auto"
NOTE = "approved by the demo's scripted reviewer"
USERNAME = "reviewer"
INTERVAL_S = 0.25
READY = "scripted reviewer ready"
# How `manage.py demo` and the tests start it (after the Python executable).
ARGS = ["-m", "toolops.demo.reviewer"]


def auto_metadata() -> dict[str, str]:
    """The metadata of a run whose approvals this script decides."""
    return {METADATA_KEY: AUTO}


def waiting_approvals(reviewer: AbstractBaseUser) -> list[Approval]:
    """Pending approvals of auto-reviewed runs that this reviewer may still approve."""
    from django.utils import timezone

    from toolops.models import Approval

    # An approval past its expiry is the expiry task's: approving it would be refused.
    return list(
        Approval.objects.pending()
        .filter(run__metadata__demo_reviewer=AUTO, expires_at__gt=timezone.now())
        .exclude(votes__reviewer=reviewer)
        .select_related("run")
        .order_by("created_at", "pk")[:50]
    )


def review_once(*, reviewer: AbstractBaseUser, out: TextIO | None = None) -> int:
    """Approve what waits now; how many were approved."""
    from toolops.approvals.services import DecisionRefused, approval_decide

    approved = 0
    for approval in waiting_approvals(reviewer):
        try:
            approval_decide(
                approval=approval, by=reviewer, approve=True, note=NOTE,
                args_hash=approval.args_hash,
            )  # fmt: skip
        except DecisionRefused as refused:
            # A person (or the expiry task, or an abort) was quicker: theirs stands.
            say(out, f"left {approval.approval_id}: {refused}")
            continue
        approved += 1
        say(out, f"approved {approval.approval_id}: {approval.tool} in run {approval.run.run_id}")
    return approved


def serve(
    *,
    stop: threading.Event,
    username: str = USERNAME,
    interval_s: float = INTERVAL_S,
    out: TextIO | None = None,
) -> None:
    """Look for approvals to decide every `interval_s` until `stop` is set."""
    from django.contrib.auth import get_user_model
    from django.db import DatabaseError, close_old_connections, connection

    reviewer = None
    say(out, f"{READY}: approving as {username!r} what waits in runs with metadata "
             f'{{"{METADATA_KEY}": "{AUTO}"}}')  # fmt: skip
    while not stop.is_set():
        try:
            if reviewer is None:
                reviewer = get_user_model().objects.filter(username=username).first()
                if reviewer is None:
                    say(out, f"no user {username!r} yet; looking again in 2 s")
                    stop.wait(2.0)
                    continue
            review_once(reviewer=reviewer, out=out)
        except DatabaseError as exc:
            # SQLite busy for longer than its timeout, or the database restarting: the
            # next look tries again on a fresh connection.
            say(out, f"database error, trying again: {exc}")
            connection.close()
        close_old_connections()
        stop.wait(interval_s)
    connection.close()


def say(out: TextIO | None, line: str) -> None:
    if out is not None:
        out.write(f"{time.strftime('%H:%M:%S')} {line}\n")
        out.flush()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m toolops.demo.reviewer",
        description="The demo's scripted reviewer: approves what waits in runs whose "
        f'metadata says {{"{METADATA_KEY}": "{AUTO}"}}.',
    )
    parser.add_argument("--username", default=USERNAME, help="the reviewer's login")
    parser.add_argument("--interval", type=float, default=INTERVAL_S, help="seconds between looks")
    args = parser.parse_args(argv)

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "toolops.settings")
    import django

    django.setup()
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, on_signal)
    serve(stop=stop, username=args.username, interval_s=args.interval, out=sys.stdout)
    say(sys.stdout, "scripted reviewer stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
