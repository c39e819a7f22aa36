"""A Python client for the ToolOps executor API (API.md), sync and async.

Importable without Django settings: it speaks HTTP (httpx) and nothing else.

    from toolops.client import ToolOps

    client = ToolOps("http://127.0.0.1:8000", token)
    with client.run(session_key="conv-42") as run:       # completed on a normal exit,
        stock = run.call("query_stock", {"sku": "A12"})   # aborted (with the error's
        order = run.call("create_order", {...})           # text) when the block raises
        if order.waiting:
            order = run.wait(order, timeout=60)           # long-polls while a person decides

Retries are made only where API.md makes them safe: every call carries a tool_call_id
(the caller's, or one made here before the first try), so sending it again answers the
recorded call instead of running it twice; a run carries its run_id likewise. Network
failures and 502/503/504 are tried again (3 tries, short backoff); any other answer is
returned, or raised as a ToolOpsError with the API's own message.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx

JSON = dict[str, Any]
WAITING = ("pending_approval", "in_progress")
USABLE = ("succeeded", "degraded")
TRIES = 3
RETRY_STATUSES = (502, 503, 504)
LONG_POLL_MAX_S = 30.0  # API.md: ?wait=N with N ≤ 30


class ToolOpsError(Exception):
    """The API refused the request (4xx/5xx): its problem body's `detail`, and more."""

    def __init__(self, status: int, detail: str, body: Any = None) -> None:
        super().__init__(f"{status}: {detail}")
        self.status = status
        self.detail = detail
        self.body = body


class Unauthorized(ToolOpsError):
    """401: a missing or wrong token."""


class NotFound(ToolOpsError):
    """404: no such run or call for this agent."""


class Conflict(ToolOpsError):
    """409: e.g. a tool_call_id already used for another call, or a run that has ended."""


class BadRequest(ToolOpsError):
    """400/413/422: the request itself is wrong (not the tool: that is a call's status)."""


class ServerError(ToolOpsError):
    """5xx after the tries that were safe to make."""


def _error(response: httpx.Response) -> ToolOpsError:
    try:
        body = response.json()
    except ValueError:
        body = None
    detail = body.get("detail") if isinstance(body, dict) else None
    detail = str(detail or response.text or response.reason_phrase)[:1000]
    kind = {401: Unauthorized, 404: NotFound, 409: Conflict}.get(response.status_code)
    if kind is None:
        kind = ServerError if response.status_code >= 500 else BadRequest
    return kind(response.status_code, detail, body)


@dataclass
class Call:
    """A call object (API.md "Calls"); `raw` is the whole answer."""

    raw: JSON

    call_id: str = field(init=False)
    tool_call_id: str = field(init=False)
    tool: str = field(init=False)
    status: str = field(init=False)

    def __post_init__(self) -> None:
        self.call_id = self.raw["call_id"]
        self.tool_call_id = self.raw["tool_call_id"]
        self.tool = self.raw["tool"]
        self.status = self.raw["status"]

    @property
    def ok(self) -> bool:
        """Succeeded or degraded: its result may be used."""
        return self.status in USABLE

    @property
    def waiting(self) -> bool:
        """Pending approval or still in progress."""
        return self.status in WAITING

    @property
    def result(self) -> Any:
        return self.raw.get("result")

    @property
    def feedback(self) -> str:
        """What to tell the model (API.md): what happened and what to do next."""
        return str(self.raw.get("feedback") or "")

    @property
    def replayed(self) -> bool:
        return bool(self.raw.get("replayed"))

    @property
    def error(self) -> JSON | None:
        return self.raw.get("error")

    @property
    def approval(self) -> JSON | None:
        return self.raw.get("approval")


def _call_body(
    tool: str, args: Mapping[str, Any] | str, step_index: int, tool_call_id: str | None,
    depends_on: list[str] | None, tokens: int, wait: float,
) -> JSON:  # fmt: skip
    body: JSON = {
        "step_index": step_index,
        "tool": tool,
        "args": args if isinstance(args, str) else dict(args),
        # Made here, before the first try, so that a retry is the same request.
        "tool_call_id": tool_call_id or f"tc-{uuid.uuid4().hex[:20]}",
    }
    if depends_on:
        body["depends_on"] = list(depends_on)
    if tokens:
        body["tokens"] = tokens
    if wait:
        body["wait"] = min(wait, LONG_POLL_MAX_S)
    return body


def _run_body(
    *, run_id: str | None = None, session_key: str | None = None,
    budget: Mapping[str, Any] | None = None, metadata: Mapping[str, Any] | None = None,
    trace_id: str | None = None,
) -> JSON:  # fmt: skip
    body: JSON = {"run_id": run_id or f"r-{uuid.uuid4().hex[:20]}"}
    for name, value in (
        ("session_key", session_key), ("budget", budget), ("metadata", metadata),
        ("trace_id", trace_id),
    ):  # fmt: skip
        if value is not None:
            body[name] = dict(value) if isinstance(value, Mapping) else value
    return body


def _abort_reason(exc: BaseException) -> str:
    return (f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)[:500]


def _delay(attempt: int) -> float:
    return 0.2 * 2**attempt


# -- sync ---------------------------------------------------------------------------------


class ToolOps:
    """The executor API for one agent (its token)."""

    def __init__(
        self, url: str, token: str, *, timeout_s: float = 60.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:  # fmt: skip
        self.url = url.rstrip("/")
        self.http = httpx.Client(
            base_url=self.url + "/api/v1",
            headers={"Authorization": f"Bearer {token}"},
            # Long-polls hold the response up to 30 s: the read timeout outlasts them.
            timeout=httpx.Timeout(timeout_s, read=max(timeout_s, LONG_POLL_MAX_S + 10)),
            transport=transport,
        )

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

    def run_create(self, **fields: Any) -> JSON:
        return self.request("POST", "/runs", retry=True, json=_run_body(**fields))

    def open_run(self, **fields: Any) -> Run:
        """A run, without the block: the caller completes or aborts it."""
        return Run(self, self.run_create(**fields))

    @contextmanager
    def run(
        self, *, run_id: str | None = None, session_key: str | None = None,
        budget: Mapping[str, Any] | None = None, metadata: Mapping[str, Any] | None = None,
        trace_id: str | None = None,
    ) -> Iterator[Run]:  # fmt: skip
        """A run for the block: completed when it ends normally, aborted (the worker then
        undoes its writes) with the exception's text when it raises."""
        data = self.run_create(
            run_id=run_id, session_key=session_key, budget=budget, metadata=metadata,
            trace_id=trace_id,
        )  # fmt: skip
        run = Run(self, data)
        try:
            yield run
        except BaseException as exc:
            run.abort(_abort_reason(exc))
            raise
        run.complete()

    def call_get(self, call_id: str, *, wait: float = 0) -> Call:
        params = {"wait": f"{min(wait, LONG_POLL_MAX_S):g}"} if wait > 0 else None
        return Call(self.request("GET", f"/calls/{call_id}", retry=True, params=params))


class Run:
    """One run: its calls, steps counted for the caller unless given."""

    def __init__(self, client: ToolOps, data: JSON) -> None:
        self.client = client
        self.data = data
        self.run_id: str = data["run_id"]
        self.trace_id: str = data.get("trace_id", "")
        self.next_step = len(data.get("calls") or [])

    def call(
        self, tool: str, args: Mapping[str, Any] | str, *, step_index: int | None = None,
        tool_call_id: str | None = None, depends_on: list[str] | None = None, tokens: int = 0,
        wait: float = 0,
    ) -> Call:  # fmt: skip
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
        while call.waiting and (left := deadline - time.monotonic()) > 0:
            call = self.client.call_get(call.call_id, wait=left)
        return call

    def tools(self, **kwargs: Any) -> list[JSON]:
        return self.client.tools(**kwargs)

    def get(self) -> JSON:
        self.data = self.client.request("GET", f"/runs/{self.run_id}", retry=True)
        return self.data

    def complete(self) -> JSON:
        self.data = self.client.request("POST", f"/runs/{self.run_id}/complete", retry=True)
        return self.data

    def abort(self, reason: str) -> JSON:
        self.data = self.client.request(
            "POST", f"/runs/{self.run_id}/abort", retry=True, json={"reason": reason}
        )
        return self.data


# -- async --------------------------------------------------------------------------------


class AsyncToolOps:
    """The executor API for one agent, for asyncio code: the same as ToolOps."""

    def __init__(
        self, url: str, token: str, *, timeout_s: float = 60.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:  # fmt: skip
        self.url = url.rstrip("/")
        self.http = httpx.AsyncClient(
            base_url=self.url + "/api/v1",
            headers={"Authorization": f"Bearer {token}"},
            timeout=httpx.Timeout(timeout_s, read=max(timeout_s, LONG_POLL_MAX_S + 10)),
            transport=transport,
        )

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

    async def run_create(self, **fields: Any) -> JSON:
        return await self.request("POST", "/runs", retry=True, json=_run_body(**fields))

    async def open_run(self, **fields: Any) -> AsyncRun:
        return AsyncRun(self, await self.run_create(**fields))

    @asynccontextmanager
    async def run(
        self, *, run_id: str | None = None, session_key: str | None = None,
        budget: Mapping[str, Any] | None = None, metadata: Mapping[str, Any] | None = None,
        trace_id: str | None = None,
    ) -> AsyncIterator[AsyncRun]:  # fmt: skip
        data = await self.run_create(
            run_id=run_id, session_key=session_key, budget=budget, metadata=metadata,
            trace_id=trace_id,
        )  # fmt: skip
        run = AsyncRun(self, data)
        try:
            yield run
        except BaseException as exc:
            await run.abort(_abort_reason(exc))
            raise
        await run.complete()

    async def call_get(self, call_id: str, *, wait: float = 0) -> Call:
        params = {"wait": f"{min(wait, LONG_POLL_MAX_S):g}"} if wait > 0 else None
        return Call(await self.request("GET", f"/calls/{call_id}", retry=True, params=params))


class AsyncRun:
    def __init__(self, client: AsyncToolOps, data: JSON) -> None:
        self.client = client
        self.data = data
        self.run_id: str = data["run_id"]
        self.trace_id: str = data.get("trace_id", "")
        self.next_step = len(data.get("calls") or [])

    async def call(
        self, tool: str, args: Mapping[str, Any] | str, *, step_index: int | None = None,
        tool_call_id: str | None = None, depends_on: list[str] | None = None, tokens: int = 0,
        wait: float = 0,
    ) -> Call:  # fmt: skip
        step = self.next_step if step_index is None else step_index
        self.next_step = max(self.next_step, step + 1)
        body = _call_body(tool, args, step, tool_call_id, depends_on, tokens, wait)
        path = f"/runs/{self.run_id}/calls"
        return Call(await self.client.request("POST", path, retry=True, json=body))

    async def wait(self, call: Call, *, timeout: float) -> Call:
        deadline = time.monotonic() + timeout
        while call.waiting and (left := deadline - time.monotonic()) > 0:
            call = await self.client.call_get(call.call_id, wait=left)
        return call

    async def tools(self, **kwargs: Any) -> list[JSON]:
        return await self.client.tools(**kwargs)

    async def complete(self) -> JSON:
        path = f"/runs/{self.run_id}/complete"
        self.data = await self.client.request("POST", path, retry=True)
        return self.data

    async def abort(self, reason: str) -> JSON:
        path = f"/runs/{self.run_id}/abort"
        self.data = await self.client.request("POST", path, retry=True, json={"reason": reason})
        return self.data
