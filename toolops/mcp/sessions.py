"""MCP sessions any web process serves. The `mcp` SDK's session manager keeps a session
in the memory of the process that opened it; here a session is a row in PostgreSQL
(records.py), and the SDK's transport in a process is only that process's local handle
on it. A request naming a session this process does not hold, live and its agent's in
the table, is served by a transport made for it on the spot, already initialized (the
handshake happened on another process): the session is "adopted".

The table decides, on every request: an unknown, ended, idle or other agent's session
answers 404 on every process; an agent's cap counts its sessions on all of them;
DELETE on one process ends the session everywhere (a process still holding it drops its
handle when it next sees the id); idleness is judged from the last request on any
process, and the session's run is completed once, by the process that ends it."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from contextlib import asynccontextmanager
from typing import Any
from uuid import uuid4

import anyio
from anyio.abc import TaskStatus
from channels.db import database_sync_to_async
from django.conf import settings
from mcp.server.auth.middleware.bearer_auth import authorization_context
from mcp.server.connection import Connection
from mcp.server.runner import serve_connection
from mcp.server.streamable_http import StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import (
    StreamableHTTPSessionManager,
    _error_response,
    _send_and_report_status,
)
from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher
from mcp_types import DEFAULT_NEGOTIATED_VERSION

from . import records
from .server import AGENT_SCOPE_KEY

log = logging.getLogger(__name__)
# An ASGI scope, typed as the SDK's session manager (Starlette's) types it.
Scope = MutableMapping[str, Any]
# The answer to a request that would open a session past the agent's cap.
Refusal = Callable[[Any], Awaitable[None]]
# A process's handle on a session outlives the session's idle time by this much, so that
# the process that served it last finds it idle in the table and ends it at once.
IDLE_GRACE_S = 2.0


def _db(fn: Any) -> Any:
    return database_sync_to_async(fn, thread_sensitive=False)


def _header(scope: Scope, name: bytes) -> str | None:
    return next((v.decode("latin-1") for k, v in scope["headers"] if k == name), None)


class SharedSessionManager(StreamableHTTPSessionManager):
    """The SDK's streamable-HTTP session manager, with its sessions in the database."""

    def __init__(self, *, app: Any, refuse: Refusal, **kwargs: Any) -> None:
        idle = settings.TOOLOPS_MCP_IDLE_S
        super().__init__(app=app, session_idle_timeout=idle + IDLE_GRACE_S, **kwargs)
        self._refuse = refuse
        self._in_flight: Counter[str] = Counter()

    @asynccontextmanager
    async def run(self) -> AsyncIterator[None]:
        async with super().run():
            assert self._task_group is not None
            self._task_group.start_soon(self._keep_records)
            yield

    async def _keep_records(self) -> None:
        """Now and then: sessions with a request in flight here are marked used, and
        sessions idle for TOOLOPS_MCP_IDLE_S (on every process) are ended."""
        pause = min(max(settings.TOOLOPS_MCP_IDLE_S / 3, 0.5), 30.0)
        while True:
            await anyio.sleep(pause)
            try:
                await _db(records.still_used)([s for s, n in self._in_flight.items() if n])
                await _db(records.reap)()
            except Exception:
                log.exception("MCP sessions' records could not be kept")

    async def _handle_stateful_request(self, scope: Scope, receive: Any, send: Any) -> None:
        session_id = _header(scope, b"mcp-session-id")
        if session_id is None:
            await self._open(scope, receive, send)
            return
        agent = scope[AGENT_SCOPE_KEY]
        requestor = authorization_context(scope["user"])
        if not await _db(records.seen)(session_id=session_id, agent=agent):
            held = self._server_instances.get(session_id)
            if held is not None and self._session_owners.get(session_id) == requestor:
                # Ended on another process (or idle): this process's handle goes too.
                await self._discard_session(session_id, held)
            # Idle, and not yet ended by any process: ended now, once (its run completed).
            await _db(records.end)(session_id=session_id, agent_id=agent.pk, only_if_idle=True)
            await _error_response("Session not found", 404)(scope, receive, send)
            return
        if scope["method"] == "DELETE":
            # Ended in the table before the answer: from the 200 on, every process says 404.
            await _db(records.end)(session_id=session_id, agent_id=agent.pk)
        transport = await self._local(session_id, requestor, scope)
        self._in_flight[session_id] += 1
        try:
            await transport.handle_request(scope, receive, send)
        finally:
            self._in_flight[session_id] -= 1
            if not self._in_flight[session_id]:
                del self._in_flight[session_id]
        if transport.is_terminated:
            await self._discard_session(session_id, transport)
        else:
            await _db(records.seen)(session_id=session_id, agent=agent)

    async def _local(self, session_id: str, requestor: Any, scope: Scope) -> Any:
        """This process's transport for a live session: its own, or one adopted now."""
        async with self._session_creation_lock:
            transport = self._server_instances.get(session_id)
            if transport is not None and not transport.is_terminated:
                return transport
            version = _header(scope, b"mcp-protocol-version")
            if version is None:
                version = await _db(records.protocol_version)(session_id=session_id)
            transport = self._transport(session_id, requestor)

            def ready(dispatcher: Any) -> Connection:
                # Initialized on the process that opened the session: born ready, in
                # the version the client names (or the one its handshake negotiated).
                connection = Connection(
                    dispatcher,
                    session_id=session_id,
                    protocol_version=version or DEFAULT_NEGOTIATED_VERSION,
                )
                connection.initialized.set()
                return connection

            assert self._task_group is not None
            await self._task_group.start(self._serve, transport, ready, scope[AGENT_SCOPE_KEY].pk)
            log.info("MCP session %s adopted", session_id)
            return transport

    async def _open(self, scope: Scope, receive: Any, send: Any) -> None:
        """A request without a session id: an initialize opens a session, if the agent
        is under its cap; anything else is refused by the SDK's transport (400)."""
        agent = scope[AGENT_SCOPE_KEY]
        requestor = authorization_context(scope["user"])
        recorded = scope["method"] == "POST"
        if recorded:
            cap = settings.TOOLOPS_MCP_AGENT_MAX_SESSIONS
            session_id = await _db(records.open_session)(agent=agent, cap=cap)
            if session_id is None:
                log.warning("MCP session refused: agent %s has %s open", agent.pk, cap)
                await self._refuse(send)
                return
        else:
            session_id = uuid4().hex
        transport = self._transport(session_id, requestor)
        established = False
        try:
            assert self._task_group is not None
            connection = await self._task_group.start(
                self._serve,
                transport,
                lambda dispatcher: Connection.for_loop(dispatcher, session_id=session_id),
                agent.pk,
            )
            status = await _send_and_report_status(transport.handle_request, scope, receive, send)
            established = status is not None and status < 400
            if established and recorded:
                await _db(records.established)(
                    session_id=session_id, protocol_version=connection.protocol_version
                )
        finally:
            if not established:
                with anyio.CancelScope(shield=True):
                    await self._discard_session(session_id, transport)
                    if recorded:
                        await _db(records.forget)(session_id=session_id)

    def _transport(self, session_id: str, requestor: Any) -> StreamableHTTPServerTransport:
        transport = StreamableHTTPServerTransport(
            mcp_session_id=session_id,
            is_json_response_enabled=self.json_response,
            event_store=self.event_store,
            security_settings=self.security_settings,
            retry_interval=self.retry_interval,
            idle_timeout=self.session_idle_timeout,
        )
        self._server_instances[session_id] = transport
        if requestor is not None:
            self._session_owners[session_id] = requestor
        return transport

    async def _serve(
        self,
        transport: StreamableHTTPServerTransport,
        connect: Callable[[Any], Connection],
        agent_id: int,
        *,
        task_status: TaskStatus[Connection],
    ) -> None:
        """The session's server task on this process (the SDK's serve_loop, with the
        connection made by `connect`). When this process's handle has been idle, the
        session is ended if the table agrees it is idle everywhere."""
        session_id = transport.mcp_session_id
        assert session_id is not None
        idle = False
        async with transport.connect() as (read_stream, write_stream):
            dispatcher: JSONRPCDispatcher[Any] = JSONRPCDispatcher(
                read_stream, write_stream, inline_methods=frozenset({"initialize"})
            )
            connection = connect(dispatcher)
            task_status.started(connection)
            idle_scope = transport.idle_scope or anyio.CancelScope()
            try:
                with idle_scope:
                    await serve_connection(
                        self.app,
                        dispatcher,
                        connection=connection,
                        lifespan_state=self._lifespan_state,
                    )
                idle = idle_scope.cancelled_caught
            except Exception:
                log.exception("MCP session %s crashed", session_id)
            finally:
                await self._discard_session(session_id, transport)
        if idle:
            with anyio.CancelScope(shield=True):
                await _db(records.end)(session_id=session_id, agent_id=agent_id, only_if_idle=True)

    async def _discard_session(self, session_id: str, transport: Any) -> None:
        """Forget this process's handle on the session (only that one: another may have
        been adopted since), and end the transport."""
        if self._server_instances.get(session_id) is transport:
            self._server_instances.pop(session_id, None)
            self._session_owners.pop(session_id, None)
        if not transport.is_terminated:
            with anyio.CancelScope(shield=True):
                await transport.terminate()
