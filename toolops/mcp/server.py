"""The MCP server's handlers (the `mcp` SDK's low-level Server): tools/list and
tools/call, each run in a worker thread with its own database connection. A call of
`toolops_policy` is ToolOps' own answer (policy.py), never an executor call."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import Any

import mcp_types as types
from channels.db import database_sync_to_async
from django.conf import settings
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.shared.exceptions import MCPError

from toolops import executor, stopping
from toolops.api import longpoll

from . import calls, policy

AGENT_SCOPE_KEY = "toolops.agent"


def _sync(fn: Any) -> Any:
    # Not thread-sensitive: requests of the process run side by side. A call waiting for
    # a reviewer waits on the event loop (_wait), not in one of these threads.
    return database_sync_to_async(fn, thread_sensitive=False)


def _agent(ctx: ServerRequestContext[Any, Any]) -> Any:
    request = ctx.request
    agent = request.scope.get(AGENT_SCOPE_KEY) if request is not None else None
    if agent is None:  # the ASGI app authenticates every request before it gets here
        raise MCPError(types.INVALID_REQUEST, "unauthenticated")
    return agent


def _session_id(ctx: ServerRequestContext[Any, Any]) -> str | None:
    request = ctx.request
    return request.headers.get("mcp-session-id") if request is not None else None


def _traceparent(ctx: ServerRequestContext[Any, Any], meta: Mapping[str, Any]) -> str:
    """The agent's W3C traceparent: from `_meta` (MCP's place for it), else the header."""
    value = meta.get("traceparent")
    if isinstance(value, str):
        return value
    request = ctx.request
    return (request.headers.get("traceparent") or "") if request is not None else ""


async def list_tools(
    ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    agent = _agent(ctx)
    tools = await _sync(calls.tool_list)(agent=agent)
    return types.ListToolsResult(tools=[types.Tool.model_validate(t) for t in tools])


async def call_tool(
    ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
) -> types.CallToolResult:
    agent = _agent(ctx)
    if params.name == policy.NAME:
        return await _policy(agent, params.arguments)
    meta = dict(params.meta or {})
    session_id = _session_id(ctx)
    try:
        outcome = await _sync(calls.call)(
            agent=agent,
            session_id=session_id,
            tool=params.name,
            arguments=params.arguments,
            meta=meta,
            traceparent=_traceparent(ctx, meta),
            wait=0,
        )
    except calls.BadMeta as exc:
        raise MCPError(types.INVALID_PARAMS, str(exc)) from None
    if outcome.waiting is not None:
        outcome = await _wait(*outcome.waiting, token_hash=agent.token_hash)
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=outcome.text)],
        structured_content=outcome.structured,
        is_error=outcome.is_error,
    )


async def _policy(agent: Any, arguments: dict[str, Any] | None) -> types.CallToolResult:
    """ToolOps' own tool (policy.py): the agent's policy, the JSON of GET /api/v1/policy."""
    try:
        text, data = await _sync(policy.answer)(agent=agent, arguments=arguments)
    except policy.Arguments as exc:
        raise MCPError(types.INVALID_PARAMS, str(exc)) from None
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)], structured_content=data
    )


async def _wait(call: Any, replayed: bool, *, token_hash: str) -> calls.Outcome:
    """Wait up to TOOLOPS_MCP_WAIT_S for a reviewer on the event loop, with a worker
    thread only for each one-row look: a waiting call holds none of the threads every
    other MCP request needs (as the API's long-polls, toolops/api/longpoll.py). A token
    revoked or replaced while it waits ends the wait with an error, as a new request with
    it would be refused."""
    deadline = time.monotonic() + settings.TOOLOPS_MCP_WAIT_S
    pauses = executor.LONG_POLL_PAUSES
    looks = 0
    look = longpoll.Look.WAITING
    stopped = asyncio.ensure_future(stopping.wait())  # a shutdown ends the wait at once
    try:
        while (left := deadline - time.monotonic()) > 0 and not stopping.is_stopping():
            await asyncio.wait([stopped], timeout=min(pauses[min(looks, len(pauses) - 1)], left))
            looks += 1
            if stopped.done():
                break
            look = await _sync(longpoll.look_at)(call.pk, token_hash)
            if look is not longpoll.Look.WAITING:
                break
    finally:
        stopped.cancel()
    if look is longpoll.Look.WAITING:  # the deadline or a stop: the answer needs one too
        look = await _sync(longpoll.look_at)(call.pk, token_hash)
    if look is longpoll.Look.REVOKED:
        raise MCPError(types.INVALID_REQUEST, longpoll.REVOKED)
    if look is longpoll.Look.GONE:
        raise MCPError(types.INVALID_REQUEST, longpoll.GONE)
    return await _sync(calls.outcome_after_wait)(call=call, replayed=replayed)


def build() -> Server[Any]:
    server: Server[Any] = Server(
        "toolops",
        instructions=(
            "Every tool call goes through ToolOps: a write with the same arguments in the "
            "same run and step is one call, answered from its record when sent again. "
            "Call toolops_policy before you plan: it lists the tools you may call and "
            "your spend limits."
        ),
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )
    # ToolOps makes the call's span itself, from its rows (traces/spans.py), in the trace
    # the agent's traceparent names; a second span per request from the SDK would double it.
    server.middleware = []
    return server
