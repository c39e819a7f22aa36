"""Problem bodies (RFC 9457) answered straight from ASGI, before Django sees the request:
the body cap and deadline (bodies.py), the in-flight cap and the work budget
(api/inflight.py, api/work.py), the MCP endpoint's door (mcp/asgi.py). One shape for
all of them, so that an agent reads every refusal the same way."""

from __future__ import annotations

import json
from http import HTTPStatus
from typing import Any

# Titles as RFC 9110 names them (Python 3.11's phrase for 413 is the older one).
TITLES = {413: "Content Too Large"}


async def send_problem(
    send: Any,
    status: int,
    detail: str,
    *,
    title: str = "",
    headers: list[tuple[bytes, bytes]] | None = None,
) -> None:
    """Answer `status` with a problem body saying `detail`, plus `headers`."""
    body = json.dumps(
        {
            "type": "about:blank",
            "title": title or TITLES.get(status) or HTTPStatus(status).phrase,
            "status": status,
            "detail": detail,
        }
    ).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/problem+json"),
                (b"content-length", str(len(body)).encode()),
                *(headers or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
