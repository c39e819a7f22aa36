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
stops it between two looks. The loop itself is in review_loop.py: it needs Django set up,
and this module must not (the scripted agent, a plain HTTP client, imports from it).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from types import FrameType

import django

from toolops.demo.review_notes import (  # noqa: F401 - the names the demo's other parts use
    ARGS,
    AUTO,
    INTERVAL_S,
    METADATA_KEY,
    NOTE,
    READY,
    USERNAME,
    auto_metadata,
    say,
)


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
    django.setup()
    # After django.setup(): the loop reads models, and this module must stay importable
    # without Django set up (the scripted agent imports NOTE and auto_metadata from it).
    from toolops.demo.review_loop import serve  # noqa: PLC0415

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
