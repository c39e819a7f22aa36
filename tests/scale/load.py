"""The scale run's clients beside the chaos agents (tests/chaos/workload.py): an agent
that keeps calling a tool whose downstream fails, until its breaker opens and refuses,
and MCP clients (JSON-RPC over streamable HTTP, through the balancer like every other
client). Every request is an operation of the history."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx

from tests.chaos.history import FAIL, INFO, OK
from tests.chaos.workload import Agent, Client

BREAKER_TOOL = "legacy_inventory"
BREAKER_PATH = "/legacy/inventory"
MCP_VERSION = "2025-06-18"


class BreakerAgent(Agent):
    """Runs of legacy_inventory calls while the shop fails every request to it: the
    breaker opens (3 failures in a row) and refuses (`circuit_open`, nothing sent), then
    after its cooldown lets one through, which fails, and opens again."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.refused = 0  # calls answered circuit_open
        self.failed = 0  # calls that reached the failing downstream

    def one_run(self, run_id: str) -> None:
        kind, _ = self.settled(
            "run",
            run_id,
            {"budget": {}},
            lambda: self.http.post(self.url("/api/v1/runs"), json={"run_id": run_id}),
        )
        if kind != OK:
            return
        for step in range(6):
            call = self.call(run_id, step, BREAKER_TOOL, {"sku": "D9"})
            reason = ((call or {}).get("error") or {}).get("reason")
            if reason == "circuit_open":
                self.refused += 1
            elif call and call.get("status") == "failed":
                self.failed += 1
            if self.stop.wait(0.5):
                break
        self.end(run_id, abort=False)


def sse_json(response: httpx.Response) -> Any:
    """A JSON-RPC answer, sent as JSON or as one `data:` event of an event stream."""
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        for line in response.text.splitlines():
            if line.startswith("data:"):
                return json.loads(line[5:])
        return None
    try:
        return response.json()
    except ValueError:
        return None


class McpClient(Client):
    """An MCP client: initialize, then tools/call of reserve_stock at successive steps of
    runs it names in `_meta`, each run completed through the API after a few calls.

    Its requests land on any web process (round robin): its session is shared through
    PostgreSQL, so none should be answered 404. A 404 for a live session is counted
    (`lost_sessions`: the runner calls any a violation) and recorded as it is (an `mcp-*`
    operation failed with 404), and the client does what an MCP client does on a 404 for
    its session: opens a new one and sends the same call again — the same run, step and
    args, so the same executor call, answered from its record."""

    def __init__(self, *args: Any, token: str, **kw: Any) -> None:
        super().__init__(*args, headers={"Authorization": f"Bearer {token}"}, **kw)
        self.http.headers["accept"] = "application/json, text/event-stream"
        self.sid = ""
        self.ids = 0
        self.lost_sessions = 0  # 404s for a session this client had opened

    def rpc(self, f: str, key: str, method: str, params: Any = None) -> tuple[str, Any]:
        self.ids += 1
        body: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            body["params"] = params
        if not method.startswith("notifications/"):
            body["id"] = self.ids
        headers = {"mcp-protocol-version": MCP_VERSION}
        if self.sid:
            headers["mcp-session-id"] = self.sid
        op = self.history.invoke(self.name, f, key, {"method": method})
        try:
            response = self.http.post(self.url("/mcp/"), json=body, headers=headers)
        except httpx.HTTPError as exc:
            self.history.complete(op, INFO, {"error": type(exc).__name__})
            return INFO, None
        code = response.status_code
        if code == 404 and self.sid:
            self.lost_sessions += 1
            self.history.complete(op, FAIL, {"status": 404, "session": "not on this process"})
            self.sid = ""
            return FAIL, None
        if code >= 500:
            self.history.complete(op, INFO, {"status": code})
            return INFO, None
        if code >= 400:
            self.history.complete(op, FAIL, {"status": code})
            return FAIL, None
        answer = sse_json(response)
        if method == "initialize":
            self.sid = response.headers.get("mcp-session-id", "")
        result = (answer or {}).get("result") if isinstance(answer, dict) else None
        error = isinstance(result, dict) and bool(result.get("isError"))
        self.history.complete(op, OK, {"http": code, "isError": error})
        return OK, result

    def session(self) -> bool:
        """A session of this client's, initialized (a new one when it has none)."""
        if self.sid:
            return True
        params = {
            "protocolVersion": MCP_VERSION,
            "capabilities": {},
            "clientInfo": {"name": self.name, "version": "1"},
        }
        kind, _ = self.rpc("mcp-init", self.name, "initialize", params)
        if kind != OK or not self.sid:
            return False
        kind, _ = self.rpc("mcp-init", self.name, "notifications/initialized")
        return kind == OK and bool(self.sid)

    def tool_call(self, run_id: str, step: int) -> Any:
        params = {
            "name": "reserve_stock",
            "arguments": {"sku": "D9", "qty": 1},
            "_meta": {"toolops/run_id": run_id, "toolops/step_index": step},
        }
        pause = 0.1
        while time.monotonic() < self.give_up_at:
            if self.session():
                kind, result = self.rpc("mcp-call", f"{run_id}/mcp-{step}", "tools/call", params)
                if kind == OK:
                    return result
            time.sleep(pause)  # the client's backoff between tries, up to give_up_at
            pause = min(pause * 2, 1.0)
        return None

    def loop(self) -> None:
        n = 0
        while not self.stop.is_set():
            n += 1
            run_id = f"{self.name}-r{n}"
            for step in range(3):
                self.tool_call(run_id, step)
            self.settled(
                "complete",
                run_id,
                None,
                lambda r=run_id: self.http.post(self.url(f"/api/v1/runs/{r}/complete")),
            )
