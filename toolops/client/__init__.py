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
returned, or raised as a ToolOpsError with the API's own message. An id or a tool name
the API would refuse is an InvalidId (a ValueError) before anything is sent.
"""

from __future__ import annotations

from .aio import AsyncRun, AsyncToolOps
from .calls import (
    BadRequest,
    Call,
    Conflict,
    InvalidId,
    NotFound,
    ServerError,
    ToolOpsError,
    Unauthorized,
)
from .sync import Run, ToolOps

__all__ = [
    "AsyncRun",
    "AsyncToolOps",
    "BadRequest",
    "Call",
    "Conflict",
    "InvalidId",
    "NotFound",
    "Run",
    "ServerError",
    "ToolOps",
    "ToolOpsError",
    "Unauthorized",
]
