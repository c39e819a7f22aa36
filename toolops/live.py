"""Live console pages. With REDIS_URL set, the worker and every web process share a
Channels layer: a change is pushed to the open pages of its group at once, and each page
fetches its live region again. On the one-machine default there is no layer shared
between processes, and the pages poll instead (`pushed()` says which).

A push must never slow the change it reports: the executor reports each call it claims
and records, on the agent's request path. So `changed()` only puts the push on a queue,
after commit; one sender per process — a daemon thread owning one event loop and its own
channel layer, so its Redis connections are made once and reused — sends it. A page only
needs to hear that its item changed, not how often: a change of an item already waiting
in the queue is dropped. A push that cannot be sent (Redis down, slow) is logged and
dropped, never raised: a page that missed one fetches its region when its socket comes
back, or on reload."""

from __future__ import annotations

import asyncio
import atexit
import logging
import os
import threading
from collections.abc import Callable
from typing import Any, Literal, TypedDict

from channels import DEFAULT_CHANNEL_LAYER
from channels.layers import channel_layers
from django.conf import settings
from django.db import transaction

log = logging.getLogger(__name__)

# How long one push may take before it is given up (a Redis that accepts connections but
# does not answer would otherwise hold the queue forever).
SEND_TIMEOUT_S = 2.0
# How long a process that exits waits for its last pushes.
EXIT_FLUSH_S = 2.0


class Changed(TypedDict):
    type: Literal["live.changed"]
    item: int


def pushed() -> bool:
    """Whether pages are told of changes (True), or poll for them (False)."""
    return bool(settings.REDIS_URL)


def changed(*, group: str, item: int) -> None:
    """Tell the open pages of `group` that `item` changed, once the change is committed.
    Returns at once: the push is sent by the process's sender thread."""
    if not pushed():
        return
    transaction.on_commit(lambda: _enqueue(group, item))


def _enqueue(group: str, item: int) -> None:
    sender().put(group, item)


def _default_layer() -> Any:
    # A layer of the sender's own, not the process's shared one: its connections belong to
    # the sender's event loop.
    return channel_layers.make_backend(DEFAULT_CHANNEL_LAYER)


class Sender:
    """Sends queued pushes from one daemon thread, on one event loop, in order of first
    change; a change of a (group, item) already waiting joins it."""

    def __init__(self, *, layer: Callable[[], Any] = _default_layer) -> None:
        self.pid = os.getpid()
        self._make_layer = layer
        self._waiting: dict[tuple[str, int], None] = {}  # an ordered set
        self._cond = threading.Condition()
        self._busy = False
        self._stopped = False
        self._failing = False  # warned once per outage, not once per push
        self._thread = threading.Thread(target=self._run, name="toolops-live", daemon=True)
        self._thread.start()

    def put(self, group: str, item: int) -> None:
        with self._cond:
            self._waiting[(group, item)] = None
            self._cond.notify()

    def flush(self, timeout: float) -> bool:
        """Wait until every queued push has been sent or given up; False on timeout."""
        with self._cond:
            return self._cond.wait_for(lambda: not (self._waiting or self._busy), timeout)

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        self._thread.join(timeout=SEND_TIMEOUT_S + 1)

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        layer = None
        try:
            while True:
                with self._cond:
                    self._cond.wait_for(lambda: self._waiting or self._stopped)
                    if self._stopped:
                        return
                    batch = list(self._waiting)
                    self._waiting.clear()
                    self._busy = True
                try:
                    if layer is None:
                        layer = self._make_layer()
                    loop.run_until_complete(self._send(layer, batch))
                except Exception:  # noqa: BLE001 - the thread must outlive any one batch
                    log.exception("live pushes failed: %d dropped", len(batch))
                finally:
                    with self._cond:
                        self._busy = False
                        self._cond.notify_all()
        finally:
            loop.close()

    async def _send(self, layer: Any, batch: list[tuple[str, int]]) -> None:
        for number, (group, item) in enumerate(batch):
            message: Changed = {"type": "live.changed", "item": item}
            try:
                await asyncio.wait_for(layer.group_send(group, message), SEND_TIMEOUT_S)
            except Exception:  # noqa: BLE001 - a page that misses a push still shows it later
                if not self._failing:
                    log.warning(
                        "could not push a change to %s; pushes are dropped until the "
                        "channel layer answers again",
                        group,
                        exc_info=True,
                    )
                self._failing = True
                # The layer is down: the rest of the batch would wait out its timeout too.
                log.debug("dropped %d pushes", len(batch) - number)
                return
            if self._failing:
                log.warning("pushes to live pages work again")
                self._failing = False


_sender: Sender | None = None
_lock = threading.Lock()


def sender() -> Sender:
    """This process's sender, started on first use. Per pid: a forked child (a Celery or
    web worker) inherits the parent's object but not its thread, so it starts its own."""
    global _sender
    current = _sender
    if current is not None and current.pid == os.getpid():
        return current
    with _lock:
        if _sender is None or _sender.pid != os.getpid():
            _sender = Sender()
        return _sender


@atexit.register
def _flush_at_exit() -> None:
    # Daemon threads still run while atexit handlers do: a command that changed a run just
    # before exiting still tells its pages. Only this process's own sender.
    current = _sender
    if current is not None and current.pid == os.getpid():
        current.flush(EXIT_FLUSH_S)


def _after_fork() -> None:
    # The parent's lock may have been held by another thread at the fork.
    global _lock, _sender
    _lock = threading.Lock()
    _sender = None


os.register_at_fork(after_in_child=_after_fork)
