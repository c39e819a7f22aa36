"""The embedded broker (toolops/broker.py) under contention: producers and consumers in
separate processes, at once, through the real transport on one folder. Every message
arrives exactly once, at one consumer, and no process dies. On kombu's own filesystem
transport (TRANSPORT = "kombu.transport.filesystem:Transport") consumers die with
JSONDecodeError on files they list before their producer wrote them."""

from __future__ import annotations

import json
import multiprocessing
import time
from collections import Counter
from contextlib import suppress
from multiprocessing.sharedctypes import Synchronized
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from kombu import Connection, Exchange, Queue

from toolops import broker

TRANSPORT = "toolops.broker:Transport"
PRODUCERS, CONSUMERS, PER_PRODUCER = 4, 4, 300
DEADLINE_S = 180.0
# A named exchange, as Celery's: every process binds the queue in the control folder.
JOBS = Queue("jobs", Exchange("jobs", type="direct"), routing_key="jobs")


def connect(folder: Path, transport: str = TRANSPORT) -> Connection:
    return Connection(
        "filesystem://",
        transport=transport,
        transport_options={
            "data_folder_in": str(folder / "out"),
            "data_folder_out": str(folder / "out"),
            "control_folder": str(folder / "control"),
        },
    )


def produce(folder: Path, transport: str, name: str, count: int) -> None:
    with connect(folder, transport) as conn:
        producer = conn.Producer(serializer="json")
        for n in range(count):
            producer.publish(
                {"id": f"{name}-{n}"},
                exchange=JOBS.exchange,
                routing_key="jobs",
                declare=[JOBS],
            )


def consume(
    folder: Path, transport: str, name: str, expected: int, received: Synchronized[int]
) -> None:
    """Take messages until every consumer together has them all; write what this one
    got to `<name>.json` (whatever arrived before a crash is written too)."""
    got: list[str] = []

    def on_message(body: dict[str, Any], message: Any) -> None:
        got.append(body["id"])
        message.ack()
        with received.get_lock():
            received.value += 1

    try:
        with (
            connect(folder, transport) as conn,
            conn.Consumer(JOBS, callbacks=[on_message], accept=["json"]),
        ):
            deadline = time.monotonic() + DEADLINE_S
            while received.value < expected and time.monotonic() < deadline:
                with suppress(TimeoutError):
                    conn.drain_events(timeout=0.2)
    finally:
        (folder / f"{name}.json").write_text(json.dumps(got))


def run_at_once(folder: Path, transport: str = TRANSPORT) -> tuple[dict[str, int], Counter[str]]:
    """Exit code of every process, and how many times each message id was received."""
    for sub in ("out", "control"):
        (folder / sub).mkdir(parents=True)
    expected = PRODUCERS * PER_PRODUCER
    # Spawned, not forked: the children hold nothing of the test process.
    mp = multiprocessing.get_context("spawn")
    received = mp.Value("i", 0)
    processes = {
        f"consumer-{n}": mp.Process(
            target=consume, args=(folder, transport, f"consumer-{n}", expected, received)
        )
        for n in range(CONSUMERS)
    }
    processes |= {
        f"producer-{n}": mp.Process(
            target=produce, args=(folder, transport, f"producer-{n}", PER_PRODUCER)
        )
        for n in range(PRODUCERS)
    }
    for process in processes.values():
        process.start()
    deadline = time.monotonic() + DEADLINE_S + 30
    for process in processes.values():
        process.join(max(0.0, deadline - time.monotonic()))
    for process in processes.values():
        if process.is_alive():
            process.kill()
            process.join()
    counts: Counter[str] = Counter()
    for n in range(CONSUMERS):
        path = folder / f"consumer-{n}.json"
        counts.update(json.loads(path.read_text()) if path.exists() else [])
    return {name: p.exitcode for name, p in processes.items()}, counts


def test_it_delivers_every_message_once_to_many_consumers_at_once(tmp_path: Path) -> None:
    exit_codes, counts = run_at_once(tmp_path)

    assert exit_codes == dict.fromkeys(exit_codes, 0)
    expected = {f"producer-{p}-{n}" for p in range(PRODUCERS) for n in range(PER_PRODUCER)}
    assert set(counts) == expected
    assert [i for i, times in counts.items() if times > 1] == []
    # Nothing left behind: no message, no temporary or claimed file.
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == []


def channel(folder: Path) -> broker.Channel:
    for sub in ("out", "control"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    conn = connect(folder)
    return conn.default_channel


def test_it_sets_a_file_that_is_not_a_message_aside_and_goes_on(tmp_path: Path) -> None:
    chan = channel(tmp_path)
    # What kombu's own producer leaves for a moment: the file, before its content.
    (tmp_path / "out" / "000000000000001_x.jobs.msg").write_bytes(b"")
    chan._put("jobs", {"body": "whole"})

    assert chan._get("jobs") == {"body": "whole"}
    names = [p.name for p in (tmp_path / "out").iterdir()]
    assert names == [".000000000000001_x.jobs.msg.corrupt"]
    assert chan._size("jobs") == 0


def test_it_skips_a_message_another_consumer_claimed_first(tmp_path: Path) -> None:
    chan = channel(tmp_path)
    chan._put("jobs", {"n": 1})
    (path,) = (tmp_path / "out").iterdir()

    assert chan._claim(path) == {"n": 1}
    assert chan._claim(path) is None  # the loser of the rename
    assert list((tmp_path / "out").iterdir()) == []


def test_it_never_delivers_a_file_still_being_written(tmp_path: Path) -> None:
    chan = channel(tmp_path)
    (tmp_path / "out" / ".000000000000001_x.jobs.msg.0123.tmp").write_bytes(b'{"n"')

    assert chan._size("jobs") == 0
    assert chan._purge("jobs") == 0
    assert chan.basic_get("jobs") is None


def test_it_keeps_every_binding_of_an_exchange_table(tmp_path: Path) -> None:
    chan = channel(tmp_path)
    for queue in ("a", "b", "c"):
        chan._queue_bind("jobs", queue, "", queue)
    chan._queue_bind("jobs", "a", "", "a")  # bound again: once in the table
    chan._delete("b", "jobs", "b", "")

    assert sorted(q.queue for q in chan.get_table("jobs")) == ["a", "c"]
    # Replaced whole: no temporary file is left beside it.
    assert sorted(p.name for p in (tmp_path / "control").iterdir()) == [
        ".jobs.exchange.lock",
        "jobs.exchange",
    ]


def test_the_default_broker_is_the_embedded_one() -> None:
    from toolops.celery import app

    if settings.CELERY_BROKER_URL != "filesystem://":
        pytest.skip("CELERY_BROKER_URL names another broker")
    with app.connection_for_read() as conn:
        assert type(conn.transport) is broker.Transport
