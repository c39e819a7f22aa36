"""The client for asyncio code: AsyncToolOps and its AsyncRun, the same as the sync ones."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
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


class AsyncToolOps:
    """The executor API for one agent, for asyncio code: the same as ToolOps."""

    def __init__(
        self,
        url: str,
        token: str,
        *,
        timeout_s: float = 60.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.http = httpx.AsyncClient(**client_options(url, token, timeout_s), transport=transport)

    async def __aenter__(self) -> AsyncToolOps:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self.http.aclose()

    async def request(self, method: str, path: str, *, retry: bool, **kwargs: Any) -> JSON:
        for attempt in range(TRIES):
            last = attempt == TRIES - 1 or not retry
            try:
                response = await self.http.request(method, path, **kwargs)
            except httpx.TransportError:
                if last:
                    raise
                await asyncio.sleep(_delay(attempt))
                continue
            if response.status_code in RETRY_STATUSES and not last:
                await asyncio.sleep(_delay(attempt))
                continue
            if response.status_code >= 400:
                raise _error(response)
            return response.json()
        raise AssertionError("unreachable")

    async def tools(self, *, format: str | None = None) -> list[JSON]:  # noqa: A002
        params = {"format": format} if format else None
        return (await self.request("GET", "/tools", retry=True, params=params))["tools"]

    async def policy(self) -> JSON:
        """The agent's policy: the same as ToolOps.policy."""
        return await self.request("GET", "/policy", retry=True)

    async def run_create(self, **fields: Any) -> JSON:
        return await self.request("POST", "/runs", retry=True, json=_run_body(**fields))

    async def open_run(self, **fields: Any) -> AsyncRun:
        return AsyncRun(self, await self.run_create(**fields))

    @asynccontextmanager
    async def run(
        self,
        *,
        run_id: str | None = None,
        session_key: str | None = None,
        budget: Mapping[str, Any] | None = None,
        metadata: Mapping[str, Any] | None = None,
        trace_id: str | None = None,
    ) -> AsyncIterator[AsyncRun]:
        data = await self.run_create(
            run_id=run_id,
            session_key=session_key,
            budget=budget,
            metadata=metadata,
            trace_id=trace_id,
        )
        run = AsyncRun(self, data)
        try:
            yield run
        except BaseException as exc:
            await run.abort(_abort_reason(exc))
            raise
        await run.complete()

    async def call_get(self, call_id: str, *, wait: float = 0) -> Call:
        path = f"/calls/{check_id(call_id, 'call_id')}"
        params = {"wait": f"{min(wait, LONG_POLL_MAX_S):g}"} if wait > 0 else None
        return Call(await self.request("GET", path, retry=True, params=params))


class AsyncRun:
    def __init__(self, client: AsyncToolOps, data: JSON) -> None:
        self.client = client
        self.data = data
        self.run_id: str = data["run_id"]
        self.trace_id: str = data.get("trace_id", "")
        # A long run's object holds its first 1,000 calls; `calls_total` counts them all.
        self.next_step = data.get("calls_total", len(data.get("calls") or []))

    async def call(
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
        step = self.next_step if step_index is None else step_index
        self.next_step = max(self.next_step, step + 1)
        body = _call_body(tool, args, step, tool_call_id, depends_on, tokens, wait)
        path = f"/runs/{self.run_id}/calls"
        return Call(await self.client.request("POST", path, retry=True, json=body))

    async def wait(self, call: Call, *, timeout: float) -> Call:
        deadline = time.monotonic() + timeout
        replayed = call.replayed
        while call.waiting and (left := deadline - time.monotonic()) > 0:
            call = await self.client.call_get(call.call_id, wait=left)
        # A duplicate answered in_progress (wait 0) stays a replay once its outcome is in.
        call.raw["replayed"] = call.raw.get("replayed") or replayed
        return call

    async def tools(self, **kwargs: Any) -> list[JSON]:
        return await self.client.tools(**kwargs)

    async def calls(self) -> list[JSON]:
        """Every call of the run, in step order: a run object holds at most 1,000, so the
        pages after them are followed (`calls_next`, `?calls_after=<call_id>`)."""
        path = f"/runs/{self.run_id}"
        page = self.data = await self.client.request("GET", path, retry=True)
        calls = list(page.get("calls") or [])
        while page.get("calls_next") and calls:
            params = {"calls_after": calls[-1]["call_id"]}
            page = await self.client.request("GET", path, retry=True, params=params)
            calls.extend(page.get("calls") or [])
        return calls

    async def complete(self) -> JSON:
        path = f"/runs/{self.run_id}/complete"
        self.data = await self.client.request("POST", path, retry=True)
        return self.data

    async def abort(self, reason: str) -> JSON:
        path = f"/runs/{self.run_id}/abort"
        self.data = await self.client.request("POST", path, retry=True, json={"reason": reason})
        return self.data
