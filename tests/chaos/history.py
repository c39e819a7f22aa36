"""The history of a chaos run, as Jepsen records one: every client operation is an
`invoke` followed by exactly one completion — `ok` (it happened, with what was answered),
`fail` (it definitely did not happen) or `info` (indeterminate: a timeout, a reset
connection, a 5xx). A client that retries an `info` records the retry as a new operation
on the same key, so the checker can tell whether every indeterminate one was resolved."""

from __future__ import annotations

import itertools
import json
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

INVOKE, OK, FAIL, INFO = "invoke", "ok", "fail", "info"
COMPLETIONS = (OK, FAIL, INFO)


@dataclass
class Op:
    """One event of the history. `key` names what the operation is about (a run, or a
    run's tool_call_id); `f` is the operation ("run", "call", "complete", "abort",
    "decide"); `value` what was asked (invoke) or answered (completion)."""

    index: int
    op_id: int
    process: str
    type: str
    f: str
    key: str
    value: Any = None
    time: float = field(default_factory=time.monotonic)

    def line(self) -> str:
        return (
            f"{self.index:>6} {self.process:<10} {self.type:<6} {self.f:<8} {self.key} "
            f"{json.dumps(self.value, default=str)[:300]}"
        )


class History:
    """Thread-safe, append-only. `invoke` returns the op id its completion names."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ops: list[Op] = []
        self._ids = itertools.count(1)

    def invoke(self, process: str, f: str, key: str, value: Any = None) -> int:
        with self._lock:
            op_id = next(self._ids)
            self._ops.append(Op(len(self._ops), op_id, process, INVOKE, f, key, value))
        return op_id

    def complete(self, op_id: int, type_: str, value: Any = None) -> None:
        if type_ not in COMPLETIONS:
            raise ValueError(f"a completion is one of {COMPLETIONS}, not {type_!r}")
        with self._lock:
            invoked = next(o for o in reversed(self._ops) if o.op_id == op_id)
            op = Op(len(self._ops), op_id, invoked.process, type_, invoked.f, invoked.key, value)
            self._ops.append(op)

    def add(self, op: Op) -> None:
        """For building a history by hand (the checker's own tests)."""
        with self._lock:
            op.index = len(self._ops)
            self._ops.append(op)

    @property
    def ops(self) -> list[Op]:
        with self._lock:
            return list(self._ops)

    def completions(self) -> list[Op]:
        return [o for o in self.ops if o.type != INVOKE]

    def counts(self) -> dict[str, int]:
        counts = dict.fromkeys((INVOKE, *COMPLETIONS), 0)
        for op in self.ops:
            counts[op.type] += 1
        return counts

    def by_key(self, key: str) -> list[Op]:
        return [o for o in self.ops if o.key == key]

    def dump(self, path: Path) -> None:
        with path.open("w") as fh:
            for op in self.ops:
                fh.write(json.dumps(asdict(op), default=str) + "\n")
