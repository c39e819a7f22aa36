"""`/healthz` and `/readyz`, answered in front of Django.

In front of Django, not as views: a probe must answer while every thread of the API's
pool waits on a database that does not answer (a liveness probe that queued behind them
would have the process restarted for the database's fault), and it must not be turned
away by the Host check or the HTTPS redirect — a balancer's check sends the Host it is
configured with (often none, or 127.0.0.1) over plain HTTP to the process. The probes
build no URL, set no cookie and read no session, so the Host they are sent is not used
for anything; they say nothing secret either. No authentication, no CSRF, no session.

- `/healthz`: the process serves. 200 `{"status": "ok"}`; no database, no thread.
- `/readyz`: 200 `{"status": "ready", "checks": {...}}` when the database answers, no
  migration is unapplied, the broker and (when set) REDIS_URL answer; else 503
  `{"status": "not ready", "checks": {...}}`, the failing check saying why. Each check
  runs in a thread of the probes' own, answers within PROBE_S or is reported as not
  answering; a check still running from an earlier probe is waited on, not started again,
  so a dead database never piles up threads. Once shutdown has begun (toolops/stopping.py)
  it answers 503 `{"shutdown": "in progress"}` at once."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from django.conf import settings

from toolops import stopping

from . import checks

log = logging.getLogger(__name__)

PROBE_S = 2.0
CHECKS: dict[str, Callable[[], str]] = {
    "database": checks.database,
    "migrations": checks.migrations,
    "broker": checks.broker,
    "redis": checks.redis,
}
_pool = ThreadPoolExecutor(max_workers=len(CHECKS), thread_name_prefix="toolops-probe")
_running: dict[str, Future[str]] = {}


async def readiness() -> tuple[bool, dict[str, str]]:
    if stopping.is_stopping():
        return False, {"shutdown": "in progress"}
    futures = {name: asyncio.wrap_future(_start(name, check)) for name, check in CHECKS.items()}
    await asyncio.wait(futures.values(), timeout=PROBE_S)
    results = {name: _result(name, future) for name, future in futures.items()}
    ready = all(ok for ok, _ in results.values())
    said = {name: text for name, (_, text) in results.items()}
    if not results["database"][0] and not results["migrations"][0]:
        said["migrations"] = "not checked (no database)"
    return ready, said


def _start(name: str, check: Callable[[], str]) -> Future[str]:
    future = _running.get(name)
    if future is None or future.done():
        future = _running[name] = _pool.submit(check)
    return future


def _result(name: str, future: asyncio.Future[str]) -> tuple[bool, str]:
    if not future.done() or future.cancelled():  # it runs on; the next probe waits on it
        return False, f"no answer within {PROBE_S:g} s"
    exc = future.exception()
    if exc is None:
        return True, future.result()
    if isinstance(exc, checks.NotReady):
        return False, str(exc)
    log.warning("readiness: %s check failed: %s", name, exc)
    return False, f"unreachable ({type(exc).__name__})"


class Probes:
    """The probes' two paths; every other request goes on to `app`."""

    PATHS = ("/healthz", "/readyz")

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        path = scope.get("path")
        if scope["type"] != "http" or path not in self.PATHS:
            return await self.app(scope, receive, send)
        head = scope["method"] == "HEAD"
        if scope["method"] not in ("GET", "HEAD"):
            body: dict[str, Any] = {"detail": f"{path} answers GET and HEAD only."}
            return await _answer(send, 405, body, head, [(b"allow", b"GET, HEAD")])
        if path == "/healthz":
            return await _answer(send, 200, {"status": "ok"}, head)
        ready, said = await readiness()
        status = {"status": "ready" if ready else "not ready", "checks": said}
        await _answer(send, 200 if ready else 503, status, head)


async def _answer(
    send: Any,
    status: int,
    body: dict[str, Any],
    head: bool,
    extra: list[tuple[bytes, bytes]] | None = None,
) -> None:
    payload = json.dumps(body).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(payload)).encode()),
        (b"cache-control", b"no-store"),
        *(extra or []),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": b"" if head else payload})


def with_stopping_hook(lifespan: Any) -> Any:
    """`lifespan`, with toolops/stopping.py's signal hook installed at its start-up."""

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        async def hooked() -> Any:
            message = await receive()
            if message["type"] == "lifespan.startup":
                stopping.install(settings.TOOLOPS_SHUTDOWN_DRAIN_S)
            return message

        await lifespan(scope, hooked, send)

    return app
