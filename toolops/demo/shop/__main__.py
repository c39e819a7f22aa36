"""``python -m toolops.demo.shop --port 9000 --db var/shop.sqlite3``: the shop as a process
of its own, stopped by SIGTERM or SIGINT (``manage.py demo`` starts it this way)."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from types import FrameType

from toolops.demo.shop.server import start_shop


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m toolops.demo.shop", description="Demo downstream shop for ToolOps."
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9000, help="0 picks a free port")
    parser.add_argument("--db", default=None, help="SQLite file (default: in memory)")
    parser.add_argument("--verbose", action="store_true", help="log every request to stderr")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    try:
        server, base_url = start_shop(args.port, args.db, host=args.host, verbose=args.verbose)
    except OSError as exc:
        print(f"shop: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 1
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    print(f"shop listening on {base_url}", flush=True)
    # A timed wait keeps the main thread responsive to signals on every platform.
    while not stop.wait(0.5):
        pass
    server.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
