"""The demo agent's two HTTP clients: the ToolOps executor API (API.md), as an agent
uses it, and the demo shop's control API (faults, state, the request log)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any

import httpx

JSON = dict[str, Any]


class Unexpected(Exception):
    """ToolOps (or the shop) answered something the scenario did not expect."""


class ApiError(Unexpected):
    def __init__(self, response: httpx.Response) -> None:
        try:
            detail = response.json().get("detail", response.text)
        except ValueError:
            detail = response.text
        super().__init__(
            f"{response.request.method} {response.request.url.path} answered "
            f"{response.status_code}: {str(detail)[:200]}"
        )
        self.status_code = response.status_code


class ToolOps:
    """The executor API (API.md), as an agent uses it."""

    def __init__(self, url: str, token: str, *, timeout_s: float = 60.0) -> None:
        self.url, self.token, self.timeout_s = url, token, timeout_s
        self.http = httpx.Client(
            base_url=url.rstrip("/") + "/api/v1",
            headers={"Authorization": f"Bearer {token}"},
            timeout=timeout_s,
        )

    def clone(self) -> ToolOps:
        """A client of its own, for another thread (a watcher outlives the demo's)."""
        return ToolOps(self.url, self.token, timeout_s=self.timeout_s)

    def close(self) -> None:
        self.http.close()

    def _json(self, response: httpx.Response, *ok: int) -> JSON:
        if response.status_code not in ok:
            raise ApiError(response)
        return response.json()

    def run_create(
        self,
        run_id: str,
        session_key: str,
        budget: JSON | None = None,
        metadata: JSON | None = None,
    ) -> JSON:
        body: JSON = {
            "run_id": run_id,
            "session_key": session_key,
            "metadata": {"demo": True, **(metadata or {})},
        }
        if budget is not None:
            body["budget"] = budget
        return self._json(self.http.post("/runs", json=body), 200, 201)

    def run_get(self, run_id: str) -> JSON:
        return self._json(self.http.get(f"/runs/{run_id}"), 200)

    def run_complete(self, run_id: str) -> JSON:
        return self._json(self.http.post(f"/runs/{run_id}/complete"), 200)

    def run_abort(self, run_id: str, reason: str) -> JSON:
        return self._json(self.http.post(f"/runs/{run_id}/abort", json={"reason": reason}), 202)

    def tools(self) -> list[JSON]:
        return self._json(self.http.get("/tools"), 200)["tools"]

    def call_post(self, run_id: str, body: JSON) -> httpx.Response:
        return self.http.post(f"/runs/{run_id}/calls", json=body)

    def call(
        self,
        run_id: str,
        step_index: int,
        tool: str,
        args: JSON,
        *,
        tool_call_id: str | None = None,
        depends_on: list[str] | None = None,
    ) -> JSON:
        body: JSON = {"step_index": step_index, "tool": tool, "args": args}
        if tool_call_id is not None:
            body["tool_call_id"] = tool_call_id
        if depends_on:
            body["depends_on"] = depends_on
        return self._json(self.call_post(run_id, body), 200, 202)

    def call_get(self, call_id: str, *, wait: float = 0) -> JSON:
        """A call as it is now; with `wait`, held up to that many seconds (≤ 30) while it
        is pending_approval or in_progress."""
        params = {"wait": f"{wait:g}"} if wait > 0 else None
        return self._json(self.http.get(f"/calls/{call_id}", params=params), 200, 202)


class ShopControl:
    """The demo shop's control API: faults, state and the request log."""

    def __init__(self, url: str) -> None:
        self.http = httpx.Client(base_url=url.rstrip("/"), timeout=10.0)

    def close(self) -> None:
        self.http.close()

    def set_fault(self, path: str, **fault: Any) -> None:
        self.http.post("/_shop/faults", json={"path": path, **fault}).raise_for_status()

    def clear_fault(self, path: str) -> None:
        self.http.post("/_shop/faults", json={"path": path}).raise_for_status()

    @contextmanager
    def fault(self, path: str, **fault: Any) -> Iterator[None]:
        """A fault on one path for the length of a block; cleared even when it fails."""
        self.set_fault(path, **fault)
        try:
            yield
        finally:
            with suppress(httpx.HTTPError):
                self.clear_fault(path)

    def state(self) -> JSON:
        response = self.http.get("/_shop/state")
        response.raise_for_status()
        return response.json()

    def requests_for_run(self, path: str, run_id: str) -> list[JSON]:
        """What reached the shop on `path` for one ToolOps run (X-Toolops-Run-Id)."""
        response = self.http.get("/_shop/requests", params={"path": path})
        response.raise_for_status()
        return [
            r
            for r in response.json()["requests"]
            if (r.get("headers") or {}).get("x-toolops-run-id") == run_id
        ]
