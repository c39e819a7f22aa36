"""The ASGI application: HTTP (Django) and WebSocket (Channels), behind a body cap and
the trusted-proxy rule for X-Forwarded-* headers."""

from __future__ import annotations

import gc
import os
from typing import Any

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "toolops.settings")

from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler  # noqa: E402
from django.core.asgi import get_asgi_application  # noqa: E402

# The console's few static files are served by the app itself, so that one command runs
# the whole product; a CDN or proxy in front may take them over.
django_application = ASGIStaticFilesHandler(get_asgi_application())

from toolops.api.middleware import ApiASGIHandler, PathRouter  # noqa: E402
from toolops.mcp.asgi import McpApp  # noqa: E402

# The executor API gets a handler with a short middleware chain of its own; /mcp/ is the
# MCP server, speaking the same executor.
mcp_application = McpApp()
http_application = PathRouter(
    prefix="/mcp",
    api=mcp_application,
    pages=PathRouter(prefix="/api/", api=ApiASGIHandler(), pages=django_application),
)

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402
from django.conf import settings  # noqa: E402

from compensations.routing import websocket_urlpatterns as desk_ws  # noqa: E402
from toolops.approvals.routing import websocket_urlpatterns as approvals_ws  # noqa: E402
from toolops.proxies import TrustedProxies  # noqa: E402
from toolops.tools import builtin, registry  # noqa: E402, F401
from traces.routing import websocket_urlpatterns as runs_ws  # noqa: E402

# The catalog is loaded at start-up: a bad file stops the server here, not mid-call.
registry.load()

Scope = dict[str, Any]


class BodyLimit:
    """Cap request bodies at BODY_LIMIT_BYTES, chunked ones included. A chunked body
    (no Content-Length) is buffered up to the cap and handed on with its length, so Django
    and DRF see it like any other body."""

    def __init__(self, app: Any, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS"):
            return await self.app(scope, receive, send)
        headers = dict(scope.get("headers") or [])
        declared = headers.get(b"content-length")
        if declared is not None:
            if not declared.isdigit() or int(declared) > self.limit:
                return await _too_large(send)
            return await self.app(scope, receive, send)
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.limit:
                return await _too_large(send)
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        new_headers = [(k, v) for k, v in scope["headers"] if k != b"transfer-encoding"]
        new_headers.append((b"content-length", str(len(body)).encode()))
        sent = False

        async def replay() -> dict[str, Any]:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app({**scope, "headers": new_headers}, replay, send)


async def _too_large(send: Any) -> None:
    import json

    body = json.dumps(
        {
            "type": "about:blank",
            "title": "Content Too Large",
            "status": 413,
            "detail": "The request body is larger than 1 MiB.",
        }  # fmt: skip
    ).encode()
    await send({
        "type": "http.response.start", "status": 413,
        "headers": [(b"content-type", b"application/problem+json"),
                    (b"content-length", str(len(body)).encode()), (b"connection", b"close")],
    })  # fmt: skip
    await send({"type": "http.response.body", "body": body})


# Outermost: X-Forwarded-* from anyone but a trusted proxy is dropped before any of the
# rest reads it, and a trusted proxy's word becomes the scope's scheme and client.
application = TrustedProxies(
    BodyLimit(
        ProtocolTypeRouter(
            {
                "http": http_application,
                "lifespan": mcp_application.lifespan,
                "websocket": AllowedHostsOriginValidator(
                    AuthMiddlewareStack(URLRouter([*runs_ws, *desk_ws, *approvals_ws]))
                ),
            }
        ),
        settings.BODY_LIMIT_BYTES,
    ),
    settings.TOOLOPS_TRUSTED_PROXIES,
)

# Everything loaded at start-up (Django, the catalog, the SDKs) moves out of the garbage
# collector's generations: a full collection then walks only what requests allocate,
# instead of pausing a request for the whole process's objects.
gc.freeze()
