"""`/mcp/`: the MCP server over streamable HTTP, as an ASGI app beside Django's.

Each request is checked here before the SDK's session manager sees it: the host against
ALLOWED_HOSTS, the agent's bearer token (401 without a valid one; a session answers only
the agent that opened it), then the protocol era. ToolOps speaks the session (handshake)
era of MCP: a session is what a call without `_meta["toolops/run_id"]` is scoped to, so a
client that probes for the sessionless 2026-07-28 era is told which versions are served
(-32022 with the `supported` list), and falls back to the handshake. Sessions are shared
by every web process through PostgreSQL (sessions.py)."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from channels.db import database_sync_to_async
from django.conf import settings
from django.http.request import split_domain_port, validate_host
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp_types import UNSUPPORTED_PROTOCOL_VERSION
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from toolops import jsonbound
from toolops.api import inflight, work
from toolops.api.auth import RateLimited, agent_for_token
from toolops.refusals import send_problem

from .server import AGENT_SCOPE_KEY, build
from .sessions import SharedSessionManager

log = logging.getLogger(__name__)
PATHS = ("/mcp", "/mcp/")
Scope = dict[str, Any]


class McpApp:
    """The MCP endpoint. Its session manager starts with the first request (or the ASGI
    lifespan, when the server sends one) and stops at the lifespan's shutdown."""

    def __init__(self) -> None:
        self.manager = SharedSessionManager(
            app=build(),
            refuse=_at_cap,
            security_settings=None,  # the host is checked here, the origin needs the token
        )
        self._ready: asyncio.Event | None = None
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["path"] not in PATHS:
            return await _problem(send, 404, "Not Found", "The MCP endpoint is /mcp/.")
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        domain, _port = split_domain_port(headers.get("host", ""))
        if not domain or not validate_host(domain, settings.ALLOWED_HOSTS):
            return await _problem(send, 400, "Bad Request", "The Host header is not allowed.")
        scheme, _, token = headers.get("authorization", "").partition(" ")
        key = inflight.agent_key(scope)
        if scheme.lower() != "bearer" or not token.strip() or key is None:
            return await _unauthorized(send, "Authorization must be 'Bearer <agent token>'.")
        # The agent's work budget (api/work.py), shared with its API requests: one in
        # debt is refused before its body is parsed.
        owed_s = work.budget().owed_s(key)
        if owed_s:
            return await work.refuse(send, owed_s)
        receive = work.metered(receive, key, work.budget())
        try:
            agent = await database_sync_to_async(agent_for_token)(token.strip())
        except RateLimited as exc:
            return await _problem(send, 429, "Too Many Requests", str(exc.detail))
        if agent is None:
            return await _unauthorized(send, "The token is not valid.")
        version = headers.get("mcp-protocol-version")
        if version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS:
            return await _unsupported_version(receive, send, version)

        await self._started()
        # The SDK binds a session to the principal that opened it: another agent's
        # request for that session answers 404, as if it did not exist.
        principal = AccessToken(token="", client_id=f"agent:{agent.pk}", scopes=[])
        scope = {**scope, "user": AuthenticatedUser(principal), AGENT_SCOPE_KEY: agent}
        await self.manager.handle_request(scope, receive, send)

    async def _started(self) -> None:
        if self._ready is None:
            self._ready = asyncio.Event()
            self._task = asyncio.create_task(self._serve())
        await self._ready.wait()

    async def _serve(self) -> None:
        async with self.manager.run():
            assert self._ready is not None
            self._ready.set()
            await self._stop.wait()

    async def lifespan(self, scope: Scope, receive: Any, send: Any) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                self._stop.set()
                if self._task is not None:
                    await self._task
                await send({"type": "lifespan.shutdown.complete"})
                return


async def _respond(send: Any, status: int, body: dict[str, Any], headers: list[Any]) -> None:
    raw = json.dumps(body).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-length", str(len(raw)).encode()), *headers],
        }
    )
    await send({"type": "http.response.body", "body": raw})


async def _problem(
    send: Any, status: int, title: str, detail: str, headers: list[Any] | None = None
) -> None:
    await send_problem(send, status, detail, title=title, headers=headers)


async def _at_cap(send: Any) -> None:
    """A request that would open a session, from an agent at its own cap: refused, so
    that one agent cannot take every session the server keeps."""
    cap = settings.TOOLOPS_MCP_AGENT_MAX_SESSIONS
    await _problem(
        send,
        429,
        "Too Many Requests",
        (
            f"This agent already has {cap} MCP sessions open, the most allowed "
            f"(TOOLOPS_MCP_AGENT_MAX_SESSIONS). End one (DELETE /mcp/ with its "
            f"Mcp-Session-Id) or reuse it; an idle session ends after "
            f"{settings.TOOLOPS_MCP_IDLE_S:g} s."
        ),
        [(b"retry-after", b"5")],
    )


async def _unauthorized(send: Any, detail: str) -> None:
    await send_problem(send, 401, detail, headers=[(b"www-authenticate", b"Bearer")])


async def _unsupported_version(receive: Any, send: Any, version: str) -> None:
    """A JSON-RPC error naming the versions served, in answer to the request's id."""
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if message["type"] != "http.request" or not message.get("more_body"):
            break
    try:
        request_id = jsonbound.loads(b"".join(chunks).decode("utf-8")).get("id")
    except (ValueError, AttributeError):
        request_id = None
    error = {
        "code": UNSUPPORTED_PROTOCOL_VERSION,
        "message": "Unsupported protocol version",
        "data": {"supported": list(HANDSHAKE_PROTOCOL_VERSIONS), "requested": version[:40]},
    }
    body = {"jsonrpc": "2.0", "id": request_id, "error": error}
    await _respond(send, 400, body, [(b"content-type", b"application/json")])
