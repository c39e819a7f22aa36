"""Bearer-token authentication for agents, and the per-agent rate limit."""

from __future__ import annotations

import time

from django.db import connection
from rest_framework import authentication, exceptions
from rest_framework.request import Request

from toolops.models import Agent, token_digest


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
        try:
            agent = Agent.objects.get(token_hash=token_digest(token), is_active=True)
        except Agent.DoesNotExist:
            raise exceptions.AuthenticationFailed("The token is not valid.") from None
        if agent.rate_limit_per_minute:
            _enforce_rate_limit(agent)
        return agent, None

    def authenticate_header(self, request: Request) -> str:
        # Having a value here makes DRF answer 401 (not 403) when the token is missing.
        return self.keyword


def _enforce_rate_limit(agent: Agent) -> None:
    """A fixed one-minute window counted in the database, so every web process shares
    it; one upsert per request, and only for agents that have a limit."""
    window = int(time.time() // 60)
    sql = (
        "INSERT INTO toolops_ratewindow (agent_id, window, count) VALUES (%s, %s, 1) "
        "ON CONFLICT (agent_id, window) DO UPDATE SET count = toolops_ratewindow.count + 1 "
        "RETURNING count"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [agent.pk, window])
        (count,) = cursor.fetchone()
    if count > (agent.rate_limit_per_minute or 0):
        raise RateLimited(wait=60 - time.time() % 60)
