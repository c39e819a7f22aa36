"""The ASGI application: HTTP (Django) and WebSocket (Channels), behind the trusted-proxy
rule for X-Forwarded-* headers, a body cap and a body-read deadline (toolops/bodies.py)."""

from __future__ import annotations

import gc
import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "toolops.settings")

from django.core.asgi import get_asgi_application  # noqa: E402

from toolops.statics import StaticFiles  # noqa: E402

# The console's few static files are served by the app itself, so that one command runs
# the whole product; a CDN or proxy in front may take them over.
django_application = StaticFiles(get_asgi_application())

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
from toolops.bodies import BodyLimit  # noqa: E402
from toolops.dbconn import set_answer_timeout  # noqa: E402
from toolops.probes.asgi import Probes, with_stopping_hook  # noqa: E402
from toolops.proxies import TrustedProxies  # noqa: E402
from toolops.tools import builtin, registry  # noqa: E402, F401
from traces.routing import websocket_urlpatterns as runs_ws  # noqa: E402

# The catalog is loaded at start-up: a bad file stops the server here, not mid-call.
registry.load()
# A web process answers 503 rather than wait on a database that does not answer.
set_answer_timeout(settings.TOOLOPS_DB_ANSWER_TIMEOUT_S)

# Outermost: X-Forwarded-* from anyone but a trusted proxy is dropped before any of the
# rest reads it, and a trusted proxy's word becomes the scope's scheme and client.
application = TrustedProxies(
    BodyLimit(
        ProtocolTypeRouter(
            {
                # /healthz and /readyz first: no middleware, no Host check, no pool.
                "http": Probes(http_application),
                # SIGTERM marks the process as stopping before uvicorn closes its socket.
                "lifespan": with_stopping_hook(mcp_application.lifespan),
                "websocket": AllowedHostsOriginValidator(
                    # types-channels want patterns of its own type, which Django's path()
                    # (as Channels' documentation routes consumers) is not typed to return.
                    AuthMiddlewareStack(URLRouter([*runs_ws, *desk_ws, *approvals_ws]))  # type: ignore[list-item]
                ),
            }
        ),
        limit=settings.BODY_LIMIT_BYTES,
        timeout_s=settings.TOOLOPS_BODY_READ_TIMEOUT_S,
    ),
    settings.TOOLOPS_TRUSTED_PROXIES,
)

# Everything loaded at start-up (Django, the catalog, the SDKs) moves out of the garbage
# collector's generations: a full collection then walks only what requests allocate,
# instead of pausing a request for the whole process's objects.
gc.freeze()
