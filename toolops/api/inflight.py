"""The per-agent cap on API requests in progress (API.md, Conventions: fairness).

Each web process serves the API from one pool of threads; one agent that keeps many
requests open (long-polls above all) could take what every other agent needs. So an
agent with TOOLOPS_AGENT_MAX_INFLIGHT requests in progress gets 429 for the next one.

The count is taken on the event loop before the request is handed to a thread or its
body read: a refused request costs no thread, no database work. It is keyed by the digest
of the bearer token (one token per agent; the digest is what the agents table stores), so
no lookup is needed to know whose request it is; a wrong token gets its own count and
then its 401. Counted in the process, or across processes through Redis when REDIS_URL
is set.

Through Redis, the same round trip also counts the agent's requests of the current minute
for its rate limit (toolops/api/auth.py): the handler puts the count in the request's
ASGI scope, and the limit costs the request no statement and no round trip of its own.
Without Redis (or Redis out of reach) no count is taken here, and auth counts the minute
with its per-process allowance instead (allowance.py)."""

from __future__ import annotations

import hashlib
import itertools
import logging
import os
import time
from typing import Any, NamedTuple

from django.conf import settings

from toolops.refusals import send_problem

log = logging.getLogger(__name__)

# A slot not given back within this (a process that died mid-request) stops counting.
# Longer than any request: a long-poll waits at most 30 s, a call's work is bounded by
# its timeouts; a slot forgotten early only lets an agent one request more.
SLOT_TTL_S = 120
RETRY_AFTER_S = 1
# A minute's count outlives its minute by one: no request reads it after that.
MINUTE_TTL_S = 120
# Where the API handler puts a request's MinuteCount for auth to read.
MINUTE_SCOPE_KEY = "toolops.minute_count"


class MinuteCount(NamedTuple):
    """An agent's requests in one minute window (epoch seconds // 60), counted across
    processes in Redis; this request included."""

    window: int
    requests: int


class RedisSlot(NamedTuple):
    """A request's slot in the agent's sorted set, and the minute it was counted in (None
    when the handler asked for no count: an agent known to have no rate limit)."""

    name: str
    member: str
    minute: MinuteCount | None


def minute_of(slot: object) -> MinuteCount | None:
    """The minute count taken with `slot`, if it was taken in Redis."""
    return slot.minute if isinstance(slot, RedisSlot) else None


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

    async def acquire(self, key: str, *, count_minute: bool = True) -> object | None:
        # No minute is counted here: the rate limit counts it itself (allowance.py).
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
    (drop the aged, add, count; and count the agent's minute: INCR of a key per token
    digest and minute, expiring after MINUTE_TTL_S), one to give it back.

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

    async def acquire(self, key: str, *, count_minute: bool = True) -> object | None:
        """A RedisSlot; None past the cap; False when Redis is out of reach (served
        uncounted, and its rate limit counted by auth). `count_minute`: also count the
        request in its agent's minute, in the same round trip."""
        name = f"toolops:inflight:{key[:32]}"
        member = f"{self._prefix}{next(self._ids)}"
        now = time.time()
        window = int(now // 60)
        minute_name = f"toolops:minute:{key[:32]}:{window}"
        try:
            pipe = self._redis().pipeline(transaction=True)
            pipe.zremrangebyscore(name, "-inf", now - SLOT_TTL_S)
            pipe.zadd(name, {member: now})
            pipe.zcard(name)
            pipe.expire(name, SLOT_TTL_S)
            if count_minute:
                pipe.incr(minute_name)
                pipe.expire(minute_name, MINUTE_TTL_S)
            answers = await pipe.execute()
        except Exception:  # noqa: BLE001 — any Redis failure: serve uncounted
            log.warning("in-flight count unavailable (Redis); request served uncounted")
            return False
        minute = MinuteCount(window, int(answers[4])) if count_minute else None
        slot = RedisSlot(name, member, minute)
        if int(answers[2]) > self.limit:
            await self._refused(slot, minute_name)
            return None
        return slot

    async def _refused(self, slot: RedisSlot, minute_name: str) -> None:
        """A request refused for the cap gives its slot back, and is not one of its
        minute's requests either: the rate limit counts requests served."""
        try:
            pipe = self._redis().pipeline(transaction=True)
            pipe.zrem(slot.name, slot.member)
            if slot.minute is not None:
                pipe.decr(minute_name)
                pipe.expire(minute_name, MINUTE_TTL_S)
            await pipe.execute()
        except Exception:  # noqa: BLE001 — the slot ages out after SLOT_TTL_S
            log.warning("in-flight slot not released (Redis); it ages out in %s s", SLOT_TTL_S)

    async def release(self, key: str, slot: object) -> None:
        if not isinstance(slot, RedisSlot):
            return
        try:
            await self._redis().zrem(slot.name, slot.member)
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
