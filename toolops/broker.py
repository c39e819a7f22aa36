"""The embedded broker: kombu's filesystem transport, with messages that appear whole.

Without CELERY_BROKER_URL, Celery runs on files (`make demo`, the one-machine default).
kombu's filesystem transport (5.x) has races that end a worker:

- `_put` creates the message file under its final name and only then locks and writes
  it. A consumer listing the folder in between takes an empty (or half-written) file,
  `loads` raises JSONDecodeError in the consumer loop, and the worker exits.
- `_get` claims a file with `shutil.move` into the system temporary folder: when that is
  another file system, a copy then a delete, so two consumers can both deliver it.
- An exchange's table (control folder) is truncated and rewritten in place: a reader
  can find it empty (JSONDecodeError again), and two first binds can lose one another.

Here, every file a reader can see is whole: it is written under a hidden temporary name
in the same folder and renamed into place (`os.replace` is atomic within a folder). A
consumer claims a message by renaming it to a hidden name of its own in that folder:
exactly one rename wins, the losers go on to the next file. A claimed file that still
does not parse (a producer outside ToolOps) is set aside as `.corrupt` and logged, never
raised. Readers skip hidden names, including the stock transport's, so old and new
processes can share a folder. Registered in settings as CELERY_BROKER_TRANSPORT.

The broker only wakes workers (the database is the queue), so files are not fsynced:
a message lost in a power cut is found again by the compensation sweep.
"""

from __future__ import annotations

import logging
import os
import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from queue import Empty
from time import monotonic_ns
from typing import Any

from kombu.exceptions import ChannelError
from kombu.transport import filesystem
from kombu.utils.encoding import bytes_to_str, str_to_bytes
from kombu.utils.json import dumps, loads

logger = logging.getLogger(__name__)


def write_whole(path: Path, data: bytes) -> None:
    """Write `path` so that a reader sees no file, the old one, or all of `data`."""
    temporary = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        with open(temporary, "wb") as f:
            f.write(data)
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def message_name(queue: str) -> str:
    """Oldest first when sorted (zero-padded milliseconds), unique (uuid), and in the
    stock transport's `<stamp>_<uuid>.<queue>.msg` form, which its readers understand."""
    return f"{monotonic_ns() // 1_000_000:015d}_{uuid.uuid4()}.{queue}.msg"


def is_message_of(filename: str, queue: str) -> bool:
    # Hidden names are files being written, claimed or set aside.
    return not filename.startswith(".") and filename.partition(".")[2] == f"{queue}.msg"


class Channel(filesystem.Channel):
    """kombu's filesystem channel, with atomic writes and claims (module docstring)."""

    # The signatures of kombu's filesystem.Channel, which its stubs leave out (they have
    # only the virtual channel's, which the filesystem transport does not follow).
    def _put(self, queue: str, payload: dict[str, Any], **kwargs: Any) -> None:  # type: ignore[override]
        path = Path(self.data_folder_out) / message_name(queue)
        try:
            write_whole(path, str_to_bytes(dumps(payload)))
        except OSError as exc:
            raise ChannelError(f"Cannot add file {str(path)!r} to directory") from exc

    def _get(self, queue: str) -> dict[str, Any]:  # type: ignore[override]  # as _put
        folder = Path(self.data_folder_in)
        for filename in sorted(os.listdir(folder)):
            if not is_message_of(filename, queue):
                continue
            payload = self._claim(folder / filename)
            if payload is not None:
                return payload
        raise Empty()

    def _claim(self, path: Path) -> dict[str, Any] | None:
        """The message at `path`, now this consumer's alone; None when another consumer
        took it first, or it was not a message."""
        claimed = path.with_name(f".{path.name}.{uuid.uuid4().hex}.claimed")
        try:
            os.rename(path, claimed)
        except OSError:
            # Another consumer won it, a purge removed it, or (Windows) it is still open.
            return None
        try:
            payload = loads(bytes_to_str(claimed.read_bytes()))
        except (OSError, ValueError) as exc:
            # Not a message ToolOps wrote (ours appear whole): keep it for a look, go on.
            corrupt = path.with_name(f".{path.name}.corrupt")
            os.replace(claimed, corrupt)
            logger.error("broker: set aside %s, not a message (%s)", corrupt, exc)
            return None
        if self.store_processed:
            shutil.move(claimed, Path(self.processed_folder) / path.name)
        else:
            claimed.unlink()
        return payload

    def _purge(self, queue: str) -> int:
        folder = Path(self.data_folder_in)
        count = 0
        for filename in os.listdir(folder):
            if not is_message_of(filename, queue):
                continue
            try:
                (folder / filename).unlink()
            except FileNotFoundError:
                continue  # a consumer claimed it
            count += 1
        return count

    def _size(self, queue: str) -> int:
        return sum(is_message_of(name, queue) for name in os.listdir(self.data_folder_in))

    @contextmanager
    def _table_locked(self, exchange: str) -> Iterator[Path]:
        """The exchange's table file, with a lock that serialises its writers (readers
        need none: the table is replaced whole)."""
        # kombu 5.7's own method, which celery-types' kombu stubs do not have yet.
        table: Path = self._exchange_file(exchange)  # type: ignore[attr-defined]
        self.control_folder.mkdir(parents=True, exist_ok=True)
        with open(table.with_name(f".{table.name}.lock"), "ab") as lock_file:
            # kombu's stubs miss LOCK_EX (set per platform) and type the file too narrowly:
            # lock() takes any open file (it locks its descriptor).
            filesystem.lock(lock_file, filesystem.LOCK_EX)  # type: ignore[arg-type, attr-defined]
            try:
                yield table
            finally:
                filesystem.unlock(lock_file)  # type: ignore[arg-type]

    def _queue_bind(
        self, exchange: str, routing_key: str | None, pattern: str | None, queue: str | None
    ) -> None:
        entry = filesystem.exchange_queue_t(routing_key or "", pattern or "", queue or "")
        with self._table_locked(exchange) as table:
            entries = self.get_table(exchange)
            if entry not in entries:
                write_whole(table, str_to_bytes(dumps([entry, *entries])))

    def _delete(
        self, queue: str, exchange: str, routing_key: str, pattern: str, *args: Any, **kwargs: Any
    ) -> None:
        # The virtual channel's part (purge the queue), then the table's, under its lock.
        super(filesystem.Channel, self)._delete(queue, exchange, routing_key, pattern)
        entry = filesystem.exchange_queue_t(routing_key or "", pattern or "", queue or "")
        with self._table_locked(exchange) as table:
            entries = self.get_table(exchange)
            if entry in entries:
                entries.remove(entry)
                write_whole(table, str_to_bytes(dumps(entries)))


class Transport(filesystem.Transport):
    """kombu's filesystem transport on the channel above."""

    Channel = Channel
