"""The wide-args attack of `bench/attack.py`: one agent sends, on 16 connections at once
and as fast as it is answered, call bodies just under the 1 MiB cap holding 80,000 keys
each (written compactly, as an attacker would). Before the JSON widths and the work
budget (toolops/jsonbound.py, toolops/api/work.py), each such body cost ~0.5 s of CPU in
the schema check and the canonical form, and another agent's `GET /tools` went from
25 ms to seconds."""

from __future__ import annotations

import http.client
import json
import threading
import time
from collections import Counter
from typing import Any

from bench.procs import HOST

STREAMS = 16
KEYS = 80_000
# A server as ToolOps was before the widths and the work budget: nothing bounds them.
UNBOUNDED_ENV = {
    "TOOLOPS_JSON_MAX_VALUES": "10000000",
    "TOOLOPS_JSON_MAX_KEYS": "10000000",
    "TOOLOPS_JSON_MAX_ITEMS": "10000000",
    "TOOLOPS_AGENT_WORK_PER_S": "1000000000000",
    "TOOLOPS_AGENT_WORK_BURST": "1000000000000",
}


def wide_body(run_step: int = 0) -> bytes:
    args = {f"k{i}": 0 for i in range(KEYS)}
    body = {"step_index": run_step, "tool": "bench_read", "args": args}
    return json.dumps(body, separators=(",", ":")).encode()


class WideAttack:
    """STREAMS threads posting the wide body to `/runs/{run_id}/calls` until stopped;
    counts the answers by status."""

    def __init__(self, port: int, token: str, run_id: str) -> None:
        self.port = port
        self.path = f"/api/v1/runs/{run_id}/calls"
        self.headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        self.body = wide_body()
        self.stopping = threading.Event()
        self.statuses: Counter[int] = Counter()
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self._stream, daemon=True) for _ in range(STREAMS)]
        self.started = 0.0
        self.seconds = 0.0

    def start(self) -> None:
        self.started = time.monotonic()
        for thread in self.threads:
            thread.start()
        # Under way when every stream has had an answer.
        while sum(self.statuses.values()) < STREAMS and time.monotonic() - self.started < 120:
            time.sleep(0.05)

    def stop(self) -> dict[str, Any]:
        self.stopping.set()
        for thread in self.threads:
            thread.join(120)
        self.seconds = time.monotonic() - self.started
        total = sum(self.statuses.values())
        return {
            "streams": STREAMS,
            "keys": KEYS,
            "body_bytes": len(self.body),
            "requests": total,
            "per_s": total / self.seconds if self.seconds else 0.0,
            "statuses": {str(k): v for k, v in sorted(self.statuses.items())},
        }

    def _stream(self) -> None:
        conn = http.client.HTTPConnection(HOST, self.port, timeout=120)
        while not self.stopping.is_set():
            try:
                conn.request("POST", self.path, body=self.body, headers=self.headers)
                response = conn.getresponse()
                response.read()
                status = response.status
            except OSError:  # the server closed the connection: open another
                conn.close()
                conn = http.client.HTTPConnection(HOST, self.port, timeout=120)
                status = 0
            with self.lock:
                self.statuses[status] += 1
        conn.close()
