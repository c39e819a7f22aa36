"""Pushes to live pages (toolops/live.py): `changed()` only queues a push, after commit;
one sender thread per process sends them, joining changes of an item that wait together,
and logs (never raises) when the channel layer is down or silent."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.redisdb import redis_url
from toolops import live

REDIS_URL = redis_url()  # this test worker's own database


class FakeLayer:
    """The channel layer's group_send: records what is sent; the first send can be held."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, int]] = []
        self.entered = threading.Event()
        self.release = threading.Event()
        self.hold_first = False

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        self.entered.set()
        if self.hold_first and not self.sent:
            await asyncio.to_thread(self.release.wait, 5)
        self.sent.append((group, message["item"]))


@pytest.fixture
def use_sender() -> Iterator[Callable[..., live.Sender]]:
    """Install a fresh sender for this process (`use_sender(layer=…)`), stopped after."""
    started: list[live.Sender] = []

    def install(**kw: Any) -> live.Sender:
        live._sender = live.Sender(**kw)
        started.append(live._sender)
        return live._sender

    yield install
    for sender in started:
        sender.stop()
    live._sender = None


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that accepts connections (the kernel's backlog) but never answers."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        yield server.getsockname()[1]


def run_within(callbacks: list[Callable[[], Any]], seconds: float) -> float:
    """Run the on-commit callbacks in a thread; how long they took (inf: not done)."""
    done = threading.Event()

    def run() -> None:
        for callback in callbacks:
            callback()
        done.set()

    t0 = time.perf_counter()
    threading.Thread(target=run, daemon=True).start()
    return time.perf_counter() - t0 if done.wait(seconds) else float("inf")


@pytest.mark.django_db
def test_it_returns_without_waiting_for_a_silent_redis_and_warns_later(
    settings: Any,
    silent_port: int,
    use_sender: Callable[..., live.Sender],
    django_capture_on_commit_callbacks: Any,
    caplog: Any,
    monkeypatch: Any,
) -> None:
    url = f"redis://127.0.0.1:{silent_port}/15"
    settings.REDIS_URL = url
    settings.CHANNEL_LAYERS = {
        "default": {"BACKEND": "channels_redis.core.RedisChannelLayer", "CONFIG": {"hosts": [url]}}
    }
    monkeypatch.setattr(live, "SEND_TIMEOUT_S", 0.5)
    sender = use_sender()
    caplog.set_level(logging.WARNING, logger="toolops.live")

    with django_capture_on_commit_callbacks() as callbacks:
        live.changed(group="run-7", item=7)
        live.changed(group="run-8", item=8)
    took = run_within(callbacks, seconds=1.5)

    assert took < 0.1, f"changed() waited {took:.3f} s for Redis"
    assert caplog.records == []  # nothing sent yet, nothing failed yet
    assert sender.flush(timeout=5)
    warnings = [r.getMessage() for r in caplog.records]
    # Once per outage: the other push of the batch is dropped without a second warning.
    assert len(warnings) == 1
    assert warnings[0].startswith("could not push a change to run-7")


def test_changes_of_one_item_waiting_together_are_sent_once(
    use_sender: Callable[..., live.Sender],
) -> None:
    layer = FakeLayer()
    layer.hold_first = True
    sender = use_sender(layer=lambda: layer)

    sender.put("run-1", 1)
    assert layer.entered.wait(5)  # the sender is busy with run-1
    for _ in range(100):
        sender.put("run-7", 7)
    sender.put("tickets", 7)
    sender.put("run-8", 8)
    for _ in range(50):
        sender.put("run-7", 7)
    layer.release.set()

    assert sender.flush(timeout=5)
    assert layer.sent == [("run-1", 1), ("run-7", 7), ("tickets", 7), ("run-8", 8)]
    # A change after those were sent is a new push.
    sender.put("run-7", 7)
    assert sender.flush(timeout=5)
    assert layer.sent[-1] == ("run-7", 7)
    assert len(layer.sent) == 5


def test_a_sender_survives_a_layer_that_fails(
    use_sender: Callable[..., live.Sender], caplog: Any
) -> None:
    layer = FakeLayer()
    failing = {"on": True}
    sent = layer.group_send

    async def group_send(group: str, message: dict[str, Any]) -> None:
        if failing["on"]:
            raise ConnectionError("Redis is down")
        await sent(group, message)

    layer.group_send = group_send  # type: ignore[method-assign]
    sender = use_sender(layer=lambda: layer)
    caplog.set_level(logging.WARNING, logger="toolops.live")

    for item in range(3):
        sender.put("run-1", item)
        assert sender.flush(timeout=5)
    failing["on"] = False
    sender.put("run-1", 9)
    assert sender.flush(timeout=5)

    assert layer.sent == [("run-1", 9)]
    assert [r.getMessage().split(";")[0] for r in caplog.records] == [
        "could not push a change to run-1",  # once for the outage, not three times
        "pushes to live pages work again",
    ]


def test_a_forked_child_starts_a_sender_of_its_own(
    use_sender: Callable[..., live.Sender],
) -> None:
    parent = use_sender(layer=FakeLayer)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report, and leave without running the test's teardown
        try:
            child = live.sender()
            ok = child is not parent and child.pid == os.getpid() and child._thread.is_alive()
            os.write(write, b"1" if ok else b"0")
        finally:
            os._exit(0)
    os.close(write)
    answer = os.read(read, 1)
    os.waitpid(pid, 0)
    os.close(read)

    assert answer == b"1"
    assert live.sender() is parent


@pytest.mark.skipif(not REDIS_URL, reason="TOOLOPS_TEST_REDIS_URL is not set (.ci/run sets it)")
def test_it_pushes_through_redis_on_one_connection(
    settings: Any, use_sender: Callable[..., live.Sender]
) -> None:
    from channels_redis.core import RedisChannelLayer

    url = REDIS_URL
    settings.CHANNEL_LAYERS = {
        "default": {"BACKEND": "channels_redis.core.RedisChannelLayer", "CONFIG": {"hosts": [url]}}
    }
    sender = use_sender()
    page = RedisChannelLayer(hosts=[url])

    async def listen() -> str:
        name = await page.new_channel()
        await page.group_add("run-42", name)
        return name

    async def heard(name: str) -> dict[str, Any]:
        return await asyncio.wait_for(page.receive(name), 5)

    loop = asyncio.new_event_loop()
    try:
        name = loop.run_until_complete(listen())
        for _ in range(2):  # two batches, on the sender's one loop and connection pool
            sender.put("run-42", 42)
            assert sender.flush(timeout=5)
            message = loop.run_until_complete(heard(name))
            assert message == {"type": "live.changed", "item": 42}
        loop.run_until_complete(page.flush())
    finally:
        loop.close()
