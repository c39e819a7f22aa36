"""Whether this web process is shutting down, and the SIGTERM hook that says so first.

uvicorn, given SIGTERM, closes its listening socket at once, then waits for the requests
in progress (up to `--timeout-graceful-shutdown`) and only then sends the ASGI lifespan
its shutdown: too late for anything a request should do differently. So, at the
lifespan's start-up, the handler uvicorn installed for SIGTERM and SIGINT is wrapped:
the signal marks the process as stopping at once — `/readyz` answers 503, a long-poll
answers now what it would answer at its wait's end — and is handed to uvicorn
TOOLOPS_SHUTDOWN_DRAIN_S later (SIGTERM only; 0: at once). In between the process still
serves, so that a balancer's health checks see the 503 and take it out of rotation
before its socket closes. A second signal during the drain is handed over at once.

Nothing here imports the rest of ToolOps: the API and the MCP server ask it, the ASGI
application installs it (toolops/probes/asgi.py)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import threading
from types import FrameType
from typing import Any

log = logging.getLogger(__name__)

_stopping = threading.Event()
_loop: asyncio.AbstractEventLoop | None = None
_event: asyncio.Event | None = None


def is_stopping() -> bool:
    return _stopping.is_set()


async def wait() -> None:
    """Return once the process is stopping (never, if it is not served with the hook)."""
    global _loop, _event
    if _event is None:
        _loop, _event = asyncio.get_running_loop(), asyncio.Event()
    if _stopping.is_set():
        return
    await _event.wait()


def begin() -> None:
    """Mark the process as stopping and wake whoever waits on it. Safe from a signal
    handler or any thread."""
    _stopping.set()
    if _loop is not None and _event is not None and not _loop.is_closed():
        with contextlib.suppress(RuntimeError):  # the loop closed in between
            _loop.call_soon_threadsafe(_event.set)


def install(drain_s: float) -> bool:
    """Wrap the server's SIGTERM and SIGINT handlers (module docstring). Called on the
    server's event loop, in the main thread; False when there is no handler to wrap
    (another server, or not the main thread)."""
    global _loop, _event
    loop = asyncio.get_running_loop()
    if _loop is not loop:
        _loop, _event = loop, asyncio.Event()
    wrapped = False
    for sig in (signal.SIGTERM, signal.SIGINT):
        previous = signal.getsignal(sig)
        if not callable(previous):
            continue
        try:
            signal.signal(sig, _handler(loop, previous, drain_s))
        except ValueError:  # not the main thread
            return False
        wrapped = True
    return wrapped


def _handler(loop: asyncio.AbstractEventLoop, previous: Any, drain_s: float) -> Any:
    def on_signal(sig: int, frame: FrameType | None) -> None:
        first = not _stopping.is_set()
        begin()
        if first and sig == signal.SIGTERM and drain_s > 0:
            log.warning("SIGTERM: draining for %g s, then shutting down", drain_s)
            loop.call_soon_threadsafe(loop.call_later, drain_s, previous, sig, None)
        else:
            previous(sig, frame)

    return on_signal
