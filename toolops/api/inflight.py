"""The per-agent cap on API requests in progress (API.md, Conventions: fairness).

Each web process serves the API from one pool of threads; one agent that keeps many
requests open (long-polls above all) could take what every other agent needs. So an
agent with TOOLOPS_AGENT_MAX_INFLIGHT requests in progress gets 429 for the next one.

The count is taken on the event loop before the request is handed to a thread or its
body read: a refused request costs no thread, no database work. It is keyed by the digest
of the bearer token (one token per agent; the digest is what the agents table stores), so
no lookup is needed to know whose request it is; a wrong token gets its own count and
then its 401. Counted in the process, or across processes through Redis when REDIS_URL
is set."""

from __future__ import annotations

import hashlib
import itertools
import logging
import os
import time
from typing import Any

from django.conf import settings

from toolops.refusals import send_problem

log = logging.getLogger(__name__)

# A slot not given back within this (a process that died mid-request) stops counting.
# Longer than any request: a long-poll waits at most 30 s, a call's work is bounded by
# its timeouts; a slot forgotten early only lets an agent one request more.
SLOT_TTL_S = 120
RETRY_AFTER_S = 1


def agent_key(scope: dict[str, Any]) -> str | None:
    """Whose request this is: the bearer token's digest, None without a bearer token."""
    for name, value in scope.get("headers") or ():
        if name == b"authorization":
            scheme, _, token = value.partition(b" ")
            token = token.strip()
            if scheme.lower() != b"bearer" or not token:
                return None
            return hashlib.sha256(token).hexdigest()
    return None


class LocalSlots:
    """Requests in progress counted in this process: one dict operation each way. Used
    only from the event loop's thread, so it needs no lock."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.counts: dict[str, int] = {}

    async def acquire(self, key: str) -> object | None:
        count = self.counts.get(key, 0)
        if count >= self.limit:
            return None
        self.counts[key] = count + 1
        return key

    async def release(self, key: str, slot: object) -> None:
        count = self.counts.get(key, 0) - 1
        if count > 0:
            self.counts[key] = count
        else:
            self.counts.pop(key, None)


class RedisSlots:
    """Requests in progress counted across processes: a sorted set per agent, one member
    per request scored by its start. A counter (INCR/DECR) would keep the slots of a
    process that died forever while the agent stays busy (each INCR renewing its expiry);
    here each slot ages out on its own after SLOT_TTL_S. One round trip to take a slot
    (drop the aged, add, count), one to give it back.

    Redis out of reach → the request is served uncounted (logged): the cap protects the
    service, and must not become the reason it is down."""

    def __init__(self, limit: int, url: str) -> None:
        self.limit = limit
        self.url = url
        self._client: Any = None
        self._ids = itertools.count()
        self._prefix = f"toolops:inflight:{os.getpid()}:{time.time_ns()}:"

    def _redis(self) -> Any:
        if self._client is None:
            # Only with REDIS_URL: redis.asyncio takes ~0.15 s to import, and a web process
            # without REDIS_URL never needs it.
            import redis.asyncio  # noqa: PLC0415
            import redis.exceptions  # noqa: PLC0415

            # A dead pooled connection (Redis restarted) is tried once more, afresh.
            self._client = redis.asyncio.Redis.from_url(
                self.url, socket_timeout=2, retry_on_error=[redis.exceptions.ConnectionError]
            )
        return self._client

    async def acquire(self, key: str) -> object | None:
        name = f"toolops:inflight:{key[:32]}"
        member = f"{self._prefix}{next(self._ids)}"
        now = time.time()
        try:
            pipe = self._redis().pipeline(transaction=True)
            pipe.zremrangebyscore(name, "-inf", now - SLOT_TTL_S)
            pipe.zadd(name, {member: now})
            pipe.zcard(name)
            pipe.expire(name, SLOT_TTL_S)
            _, _, count, _ = await pipe.execute()
        except Exception:  # noqa: BLE001 — any Redis failure: serve uncounted
            log.warning("in-flight count unavailable (Redis); request served uncounted")
            return False
        if count > self.limit:
            await self.release(key, (name, member))
            return None
        return (name, member)

    async def release(self, key: str, slot: object) -> None:
        if not isinstance(slot, tuple):
            return
        try:
            await self._redis().zrem(*slot)
        except Exception:  # noqa: BLE001 — the slot ages out after SLOT_TTL_S
            log.warning("in-flight slot not released (Redis); it ages out in %s s", SLOT_TTL_S)


def slots_from_settings() -> LocalSlots | RedisSlots:
    limit = settings.TOOLOPS_AGENT_MAX_INFLIGHT
    if settings.REDIS_URL:
        return RedisSlots(limit, settings.REDIS_URL)
    return LocalSlots(limit)


async def refuse(send: Any, limit: int) -> None:
    """429 with Retry-After and a problem body (RFC 9457)."""
    detail = (
        f"This agent already has {limit} requests in progress, the most allowed "
        f"(TOOLOPS_AGENT_MAX_INFLIGHT); retry when one has ended."
    )
    retry_after = [(b"retry-after", str(RETRY_AFTER_S).encode())]
    await send_problem(send, 429, detail, headers=retry_after)
