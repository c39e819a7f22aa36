"""The client for synchronous code: ToolOps and its Run."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import httpx

from .calls import (
    JSON,
    LONG_POLL_MAX_S,
    RETRY_STATUSES,
    TRIES,
    Call,
    _abort_reason,
    _call_body,
    _delay,
    _error,
    _run_body,
    check_id,
    client_options,
)


class ToolOps:
    """The executor API for one agent (its token)."""

    def __init__(
        self,
        url: str,
        token: str,
        *,
        timeout_s: float = 60.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.http = httpx.Client(**client_options(url, token, timeout_s), transport=transport)

    def __enter__(self) -> ToolOps:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.http.close()

    def request(self, method: str, path: str, *, retry: bool, **kwargs: Any) -> JSON:
        """One API request; tried again on network errors and 502/503/504 only when
        `retry` (the request is safe to repeat)."""
        for attempt in range(TRIES):
            last = attempt == TRIES - 1 or not retry
            try:
                response = self.http.request(method, path, **kwargs)
            except httpx.TransportError:
                if last:
                    raise
                time.sleep(_delay(attempt))
                continue
            if response.status_code in RETRY_STATUSES and not last:
                time.sleep(_delay(attempt))
                continue
            if response.status_code >= 400:
                raise _error(response)
            return response.json()
        raise AssertionError("unreachable")

    def tools(self, *, format: str | None = None) -> list[JSON]:  # noqa: A002 - API.md's name
        """The catalog's tools (`format="openai"` for function definitions)."""
        params = {"format": format} if format else None
        return self.request("GET", "/tools", retry=True, params=params)["tools"]

    def policy(self) -> JSON:
        """The agent's policy (API.md "Agent policy"): `version` (None without one), the
        `tools` it may call, and its `limits` with spent, max and resets_at."""
        return self.request("GET", "/policy", retry=True)

    def run_create(self, **fields: Any) -> JSON:
        return self.request("POST", "/runs", retry=True, json=_run_body(**fields))

    def open_run(self, **fields: Any) -> Run:
        """A run, without the block: the caller completes or aborts it."""
        return Run(self, self.run_create(**fields))

    @contextmanager
    def run(
        self,
        *,
        run_id: str | None = None,
        session_key: str | None = None,
        budget: Mapping[str, Any] | None = None,
        metadata: Mapping[str, Any] | None = None,
        trace_id: str | None = None,
    ) -> Iterator[Run]:
        """A run for the block: completed when it ends normally, aborted (the worker then
        undoes its writes) with the exception's text when it raises."""
        data = self.run_create(
            run_id=run_id,
            session_key=session_key,
            budget=budget,
            metadata=metadata,
            trace_id=trace_id,
        )
        run = Run(self, data)
        try:
            yield run
        except BaseException as exc:
            run.abort(_abort_reason(exc))
            raise
        run.complete()

    def call_get(self, call_id: str, *, wait: float = 0) -> Call:
        path = f"/calls/{check_id(call_id, 'call_id')}"
        params = {"wait": f"{min(wait, LONG_POLL_MAX_S):g}"} if wait > 0 else None
        return Call(self.request("GET", path, retry=True, params=params))


class Run:
    """One run: its calls, steps counted for the caller unless given."""

    def __init__(self, client: ToolOps, data: JSON) -> None:
        self.client = client
        self.data = data
        self.run_id: str = data["run_id"]
        self.trace_id: str = data.get("trace_id", "")
        # A long run's object holds its first 1,000 calls; `calls_total` counts them all.
        self.next_step = data.get("calls_total", len(data.get("calls") or []))

    def call(
        self,
        tool: str,
        args: Mapping[str, Any] | str,
        *,
        step_index: int | None = None,
        tool_call_id: str | None = None,
        depends_on: list[str] | None = None,
        tokens: int = 0,
        wait: float = 0,
    ) -> Call:
        """Run one tool call. Its outcome is a Call, whatever it is: a failed tool is not
        an exception (its `feedback` is for the model). `wait` holds the answer up to that
        many seconds (≤ 30) while it waits for a person."""
        step = self.next_step if step_index is None else step_index
        self.next_step = max(self.next_step, step + 1)
        body = _call_body(tool, args, step, tool_call_id, depends_on, tokens, wait)
        return Call(
            self.client.request("POST", f"/runs/{self.run_id}/calls", retry=True, json=body)
        )

    def wait(self, call: Call, *, timeout: float) -> Call:
        """Long-poll `call` while it waits (approval, or in progress), up to `timeout`
        seconds; the call as it then stands."""
        deadline = time.monotonic() + timeout
        replayed = call.replayed
        while call.waiting and (left := deadline - time.monotonic()) > 0:
            call = self.client.call_get(call.call_id, wait=left)
        # A duplicate answered in_progress (wait 0) stays a replay once its outcome is in.
        call.raw["replayed"] = call.raw.get("replayed") or replayed
        return call

    def tools(self, **kwargs: Any) -> list[JSON]:
        return self.client.tools(**kwargs)

    def get(self) -> JSON:
        self.data = self.client.request("GET", f"/runs/{self.run_id}", retry=True)
        return self.data

    def calls(self) -> list[JSON]:
        """Every call of the run, in step order: a run object holds at most 1,000, so the
        pages after them are followed (`calls_next`, `?calls_after=<call_id>`)."""
        page = self.get()
        calls = list(page.get("calls") or [])
        while page.get("calls_next") and calls:
            params = {"calls_after": calls[-1]["call_id"]}
            page = self.client.request("GET", f"/runs/{self.run_id}", retry=True, params=params)
            calls.extend(page.get("calls") or [])
        return calls

    def complete(self) -> JSON:
        self.data = self.client.request("POST", f"/runs/{self.run_id}/complete", retry=True)
        return self.data

    def abort(self, reason: str) -> JSON:
        self.data = self.client.request(
            "POST", f"/runs/{self.run_id}/abort", retry=True, json={"reason": reason}
        )
        return self.data
