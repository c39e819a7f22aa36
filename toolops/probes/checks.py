"""The readiness checks, each a blocking function that returns "ok" (or a note that is
ok) or raises; toolops/probes/asgi.py runs them in threads, bounded in time.

What a failing check says is short and carries no URL, host or password: the exception's
class only. The full error goes to the log."""

from __future__ import annotations

import threading
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.db import close_old_connections, connection
from django.db.migrations.executor import MigrationExecutor
from kombu import Connection
from redis import Redis
from redis.backoff import NoBackoff
from redis.retry import Retry

TIMEOUT_S = 2.0  # a socket wait of a check; the whole probe is bounded by asgi.py too
EMBEDDED_BROKERS = ("filesystem", "memory", "sqlite", "sqla+sqlite")

_migrated = threading.Event()  # once every migration is applied, it stays so
_clients: dict[str, Any] = {}
_clients_lock = threading.Lock()


class NotReady(Exception):
    """A check's failure, with what the probe says of it."""


def database() -> str:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    finally:
        close_old_connections()  # back to the pool, as a request's end does
    return "ok"


def migrations() -> str:
    """No migration on disk left unapplied. Once true, not asked again: migration files
    change with a deploy, and a deploy starts new processes."""
    if _migrated.is_set():
        return "ok"
    try:
        executor = MigrationExecutor(connection)
        plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
    finally:
        close_old_connections()
    if plan:
        names = [f"{m.app_label}.{m.name}" for m, _backwards in plan]
        more = f" and {len(names) - 3} more" if len(names) > 3 else ""
        raise NotReady(f"{len(names)} unapplied: {', '.join(names[:3])}{more}")
    _migrated.set()
    return "ok"


def broker() -> str:
    url = settings.CELERY_BROKER_URL
    scheme = urlsplit(url).scheme
    if scheme in EMBEDDED_BROKERS:
        return "ok (embedded)"
    if scheme in ("redis", "rediss"):
        return _ping(url)
    with Connection(url, connect_timeout=TIMEOUT_S) as conn:
        # kombu compares it with the seconds elapsed (a float works); its stubs say int.
        conn.ensure_connection(max_retries=1, timeout=TIMEOUT_S)  # type: ignore[arg-type]
    return "ok"


def redis() -> str:
    url = settings.REDIS_URL
    return _ping(url) if url else "not set"


def _ping(url: str) -> str:
    with _clients_lock:
        client = _clients.get(url)
        if client is None:
            client = _clients[url] = Redis.from_url(
                url,
                socket_connect_timeout=TIMEOUT_S,
                socket_timeout=TIMEOUT_S,
                retry=Retry(NoBackoff(), 0),
                health_check_interval=0,
            )
    client.ping()
    return "ok"
