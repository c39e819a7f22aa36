"""Bearer-token authentication for agents, and the per-agent rate limit."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from django.db.models import Q
from django.db.models.signals import post_save
from django.dispatch import receiver
from django.utils import timezone
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions
from rest_framework.request import Request

from toolops.accounts.models import Agent, token_digest

from . import allowance, inflight


class RateLimited(exceptions.Throttled):
    default_detail = "Too many requests for this agent."


class BearerTokenAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request: Request) -> tuple[Agent, None] | None:
        header = request.META.get("HTTP_AUTHORIZATION", "")
        if not header:
            return None
        scheme, _, token = header.partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            raise exceptions.AuthenticationFailed("Authorization must be 'Bearer <token>'.")
        agent = agent_for_token(token, minute=minute_counted(request))
        if agent is None:
            raise exceptions.AuthenticationFailed("The token is not valid.")
        return agent, None

    def authenticate_header(self, request: Request) -> str:
        # Having a value here makes DRF answer 401 (not 403) when the token is missing.
        return self.keyword


# token digest → (agent, valid until): spares a query on every request. A deactivated
# agent is refused by every process within AGENT_CACHE_S.
AGENT_CACHE_S = 10.0
_agents: dict[str, tuple[Agent, float]] = {}


def agent_for_token(token: str, *, minute: inflight.MinuteCount | None = None) -> Agent | None:
    """The active agent holding `token`, within its rate limit (else RateLimited).
    `minute`: the request's count in Redis, when the API handler took one."""
    agent = _agent_for(token_digest(token))
    # No limit (None, or 0 where one was stored): nothing is counted or compared.
    if agent is not None and agent.rate_limit_per_minute:
        _enforce_rate_limit(agent, minute)
    return agent


def _agent_for(digest: str) -> Agent | None:
    hit = _agents.get(digest)
    now = time.monotonic()
    if hit is not None and hit[1] > now:
        _mark_used(hit[0], now)
        return hit[0]
    agent = Agent.objects.filter(token_hash=digest, is_active=True).first()
    if agent is None:
        _agents.pop(digest, None)
        return None
    if len(_agents) > 10_000:
        _agents.clear()
    _agents[digest] = (agent, now + AGENT_CACHE_S)
    _mark_used(agent, now)
    return agent


@receiver(post_save, sender=Agent)
def forget_agent(sender: Any, instance: Agent, **kwargs: Any) -> None:
    """An agent saved (token rotated or revoked, deactivated in admin): this process stops
    trusting its cached tokens now; other processes within AGENT_CACHE_S."""
    for digest in [d for d, (agent, _) in _agents.items() if agent.pk == instance.pk]:
        _agents.pop(digest, None)


# Agent.last_used_at, for the console: written at most once a minute per agent and process
# (agent pk → monotonic time of the next write), and the UPDATE changes nothing when
# another process wrote within the minute. A dict look-up per request otherwise.
LAST_USED_EVERY_S = 60.0
_last_used_due: dict[int, float] = {}


def _mark_used(agent: Agent, now: float) -> None:
    # `id`, not `pk`: the hot path, and `pk` is a property that looks the field up.
    if now < _last_used_due.get(agent.id, 0.0):
        return
    _last_used_due[agent.id] = now + LAST_USED_EVERY_S
    stamp = timezone.now()
    stale = Q(last_used_at__isnull=True) | Q(
        last_used_at__lt=stamp - timedelta(seconds=LAST_USED_EVERY_S)
    )
    Agent.objects.filter(stale, pk=agent.pk).update(last_used_at=stamp)


# The wall clock the rate windows are counted on; the tests set one of their own rather
# than wait for a minute to turn.
clock: Callable[[], float] = time.time


def counts_requests(digest: str) -> bool:
    """Whether the API handler should count this token's requests in Redis (inflight.py):
    not when this process knows its agent has no rate limit. Read on the event loop: one
    dict look-up, a cached agent at worst AGENT_CACHE_S out of date (a limit set since is
    then counted in the database for that request: see `_enforce_rate_limit`)."""
    hit = _agents.get(digest)
    return hit is None or bool(hit[0].rate_limit_per_minute)


def minute_counted(request: Request) -> inflight.MinuteCount | None:
    """This request's minute count, taken by the API handler in Redis in the same round
    trip as its in-flight slot and put in the ASGI scope; None when there is none (no
    REDIS_URL, Redis out of reach, the MCP endpoint, the test client's WSGI requests)."""
    scope = getattr(request._request, "scope", None)
    if not isinstance(scope, dict):
        return None
    minute = scope.get(inflight.MINUTE_SCOPE_KEY)
    return minute if isinstance(minute, inflight.MinuteCount) else None


def _enforce_rate_limit(agent: Agent, minute: inflight.MinuteCount | None) -> None:
    """A fixed one-minute window per agent, shared by every web process: counted in Redis
    when the request brings its count (no statement of its own), else by this process's
    allowance, reconciled with the database every few requests (allowance.py)."""
    limit = agent.rate_limit_per_minute or 0
    now = clock()
    if minute is not None:
        if minute.requests > limit:
            # Until the counted window ends (its minute, not this clock's, should it
            # have turned since the count was taken).
            raise RateLimited(wait=min(60.0, max(0.0, (minute.window + 1) * 60 - now)))
        return
    if not allowance.PROCESS.admit(agent_id=agent.id, limit=limit, window=int(now // 60)):
        raise RateLimited(wait=60 - now % 60)


class BearerTokenScheme(OpenApiAuthenticationExtension):
    target_class = BearerTokenAuthentication
    name = "bearerAuth"

    def get_security_definition(self, auto_schema: object) -> dict[str, str]:
        return {"type": "http", "scheme": "bearer"}
