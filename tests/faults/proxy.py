"""A TCP fault proxy: listens on a local port, forwards to an upstream, and on command
delays, drops, resets, blackholes, refuses or half-opens the traffic. Its asyncio loop
runs in a background thread, so a test (or a standalone runner) drives it with plain
calls; each call returns once the fault is in force.

    with FaultProxy(upstream=("127.0.0.1", 5432)) as proxy:
        url = f"postgres://127.0.0.1:{proxy.port}/toolops"
        proxy.reset(); proxy.refuse(); ...; proxy.heal()

Each fault replaces the one before (`reset` alone is a one-off action that leaves the
state as it is); `heal` passes everything through again.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import socket
import struct
import threading
from collections import Counter
from collections.abc import Coroutine, Iterable
from concurrent.futures import Future
from typing import Any

MODES = ("healthy", "delay", "drop", "blackhole", "refuse", "half_open")
KINDS = (*MODES, "heal", "reset")
Fault = tuple[float, str, float | None, dict[str, Any]]  # (at_s, kind, duration_s, kwargs)


class _Link:
    """One proxied connection: the client's stream and, once connected, the upstream's."""

    def __init__(self, client: asyncio.StreamWriter) -> None:
        self.client = client
        self.upstream: asyncio.StreamWriter | None = None
        self.tasks: list[asyncio.Task[None]] = []

    def abort(self) -> None:
        """Reset both sides now: SO_LINGER 0, so closing sends RST rather than FIN."""
        for writer in (self.client, self.upstream):
            if writer is None:
                continue
            sock = writer.get_extra_info("socket")
            with contextlib.suppress(OSError, AttributeError):  # already closed
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()
        for task in self.tasks:
            if task is not asyncio.current_task():
                task.cancel()


class FaultProxy:
    """A TCP proxy to `upstream` on `host:listen_port` (0: a free port, see `.port`)."""

    def __init__(
        self,
        upstream: tuple[str, int],
        listen_port: int = 0,
        *,
        host: str = "127.0.0.1",
        seed: int | None = None,
    ) -> None:
        self.upstream = upstream
        self.host = host
        self.port = listen_port
        self._random = random.Random(seed)
        self._mode = "healthy"
        self._delay = 0.0
        self._drop = 0.0
        self._links: set[_Link] = set()
        self._counts: Counter[str] = Counter()
        self._faults: Counter[str] = Counter()
        self._server: asyncio.Server | None = None
        self._flowing: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    # The public side: called from any thread; each waits for the loop to apply it.
    def start(self) -> FaultProxy:
        if self._thread is not None:
            raise RuntimeError("the fault proxy is already started")
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name=f"fault-proxy-{self.upstream[1]}", daemon=True
        )
        self._thread.start()
        self._call(self._apply("heal"))
        return self

    def stop(self) -> None:
        if self._thread is None or self._loop is None:
            return
        self._call(self._shutdown())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()
        self._thread = self._loop = None

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def heal(self) -> None:
        self._call(self._apply("heal"))

    def delay(self, seconds: float) -> None:
        self._call(self._apply("delay", seconds=seconds))

    def drop(self, p: float) -> None:
        self._call(self._apply("drop", p=p))

    def reset(self) -> None:
        self._call(self._apply("reset"))

    def blackhole(self) -> None:
        self._call(self._apply("blackhole"))

    def refuse(self) -> None:
        self._call(self._apply("refuse"))

    def half_open(self) -> None:
        self._call(self._apply("half_open"))

    @property
    def state(self) -> str:
        return self._mode

    @property
    def stats(self) -> dict[str, Any]:
        return {
            "connections": self._counts["connections"],
            "open": len(self._links),
            "bytes_up": self._counts["bytes_up"],
            "bytes_down": self._counts["bytes_down"],
            "swallowed": self._counts["swallowed"],
            "faults": dict(self._faults),
        }

    def schedule(self, timeline: Iterable[Fault]) -> Future:
        """Apply faults on a timeline, in the proxy's thread: each `(at_s, kind,
        duration_s, kwargs)` applies `kind(**kwargs)` at `at_s` s from now, then heals
        `duration_s` s later (None: stays). Returns a future done when the last is."""
        events = [self._checked_event(event) for event in timeline]
        assert self._loop is not None, "start the fault proxy before scheduling faults"
        return asyncio.run_coroutine_threadsafe(self._timeline(events), self._loop)

    # The loop's side.
    def _call(self, coro: Coroutine[Any, Any, Any]) -> Any:
        if self._loop is None:
            coro.close()
            raise RuntimeError("the fault proxy is not started")
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(10)

    @staticmethod
    def _checked_event(event: Fault) -> Fault:
        at, kind, duration, kwargs = event
        if kind not in KINDS:
            raise ValueError(f"unknown fault {kind!r}: one of {', '.join(KINDS)}")
        if at < 0 or (duration is not None and duration < 0):
            raise ValueError(f"fault {kind!r}: times must be 0 or more, not {at}, {duration}")
        return at, kind, duration, dict(kwargs or {})

    async def _timeline(self, events: list[Fault]) -> None:
        async def one(at: float, kind: str, duration: float | None, kwargs: dict) -> None:
            await asyncio.sleep(at)
            await self._apply(kind, **kwargs)
            if duration is not None:
                await asyncio.sleep(duration)
                await self._apply("heal")

        await asyncio.gather(*(one(*event) for event in events))

    async def _apply(self, kind: str, *, seconds: float = 0.0, p: float = 0.0) -> None:
        if kind not in KINDS:
            raise ValueError(f"unknown fault {kind!r}: one of {', '.join(KINDS)}")
        if self._flowing is None:
            self._flowing = asyncio.Event()
        if kind == "reset":
            links = list(self._links)
            for link in links:
                link.abort()
            self._faults["reset"] += len(links)
            return
        if kind == "delay" and not seconds >= 0:
            raise ValueError(f"delay must be 0 s or more, not {seconds!r}")
        if kind == "drop" and not 0 <= p <= 1:
            raise ValueError(f"drop probability must be between 0 and 1, not {p!r}")
        self._mode = "healthy" if kind == "heal" else kind
        self._delay = seconds if kind == "delay" else 0.0
        self._drop = p if kind == "drop" else 0.0
        if kind not in ("heal", "drop"):  # dropped connections are counted one by one
            self._faults[kind] += 1
        if kind == "blackhole":
            self._flowing.clear()
        else:
            self._flowing.set()
        if kind == "refuse" and self._server is not None:
            self._server.close()
            self._server = None
        elif kind != "refuse" and self._server is None:
            self._server = await asyncio.start_server(
                self._accept, self.host, self.port, reuse_address=True
            )
            self.port = self._server.sockets[0].getsockname()[1]

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        for link in list(self._links):
            link.abort()
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._counts["connections"] += 1
        if self._mode == "drop" and self._random.random() < self._drop:
            self._faults["drop"] += 1
            writer.transport.abort()
            return
        link = _Link(writer)
        self._links.add(link)
        try:
            assert self._flowing is not None
            await self._flowing.wait()  # a blackhole holds new connections too
            try:
                up_reader, link.upstream = await asyncio.open_connection(*self.upstream)
            except OSError:
                link.abort()
                return
            link.tasks = [
                asyncio.create_task(self._pump(link, reader, link.upstream, "bytes_up")),
                asyncio.create_task(self._pump(link, up_reader, writer, "bytes_down")),
            ]
            await asyncio.gather(*link.tasks, return_exceptions=True)
        except asyncio.CancelledError:
            pass  # the proxy stops: its end, not an error of the connection
        finally:
            self._links.discard(link)
            for side in (link.client, link.upstream):
                if side is not None:
                    side.close()

    async def _pump(
        self, link: _Link, src: asyncio.StreamReader, dst: asyncio.StreamWriter, key: str
    ) -> None:
        assert self._flowing is not None
        try:
            while data := await src.read(65536):
                await self._flowing.wait()
                if self._delay:
                    await asyncio.sleep(self._delay)
                if key == "bytes_down" and self._mode == "half_open":
                    self._counts["swallowed"] += len(data)
                    continue
                self._counts[key] += len(data)
                dst.write(data)
                await dst.drain()
            if dst.can_write_eof() and not dst.transport.is_closing():
                dst.write_eof()
        except OSError:
            link.abort()
