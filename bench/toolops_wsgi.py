"""ToolOps' Django as a WSGI application, for `run.py --study` only: how much of a call's
time is Django's ASGI handler (a thread and a context per request, a thread hop per sync
middleware hook) rather than ToolOps. Served with `uvicorn --interface wsgi`, whose
adapter runs every request on a fixed pool of threads. Not a way to deploy ToolOps (no
WebSocket, no body cap for chunked requests)."""

from __future__ import annotations

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "toolops.settings")

from django.core.wsgi import get_wsgi_application  # noqa: E402

application = get_wsgi_application()

from toolops.tools import builtin, registry  # noqa: E402, F401

registry.load()
