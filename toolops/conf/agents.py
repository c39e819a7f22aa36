"""Settings: serving agents — the API's threads, fairness between agents, the MCP server."""

from __future__ import annotations

import os

from django.core.exceptions import ImproperlyConfigured

from toolops.envs import envfloat, envint

# Threads serving the executor API in each web process (toolops/api/middleware.py): as
# many as the database pool's connections, since each request holds one while it runs
# (a long-poll holds none while it waits: toolops/api/longpoll.py).
TOOLOPS_API_THREADS = envint("TOOLOPS_API_THREADS", envint("TOOLOPS_DB_POOL_MAX", 20))
if TOOLOPS_API_THREADS < 1:
    raise ImproperlyConfigured(f"TOOLOPS_API_THREADS must be at least 1, got {TOOLOPS_API_THREADS}")
# Fairness between agents (API.md, Conventions): the most API requests one agent may
# have in progress (long-polls included) before it gets 429 — counted per process, or
# across processes through Redis when REDIS_URL is set; and the per-minute rate limit a
# new agent gets (`create_agent`; 0: none), which operators change per agent in the
# console's Agents page.
TOOLOPS_AGENT_MAX_INFLIGHT = envint("TOOLOPS_AGENT_MAX_INFLIGHT", 32)
if TOOLOPS_AGENT_MAX_INFLIGHT < 1:
    raise ImproperlyConfigured(
        f"TOOLOPS_AGENT_MAX_INFLIGHT must be at least 1, got {TOOLOPS_AGENT_MAX_INFLIGHT}"
    )
TOOLOPS_AGENT_RATE_LIMIT_PER_MINUTE = envint("TOOLOPS_AGENT_RATE_LIMIT_PER_MINUTE", 600)
if TOOLOPS_AGENT_RATE_LIMIT_PER_MINUTE < 0:
    raise ImproperlyConfigured(
        "TOOLOPS_AGENT_RATE_LIMIT_PER_MINUTE must be 0 (no limit) or more, "
        f"got {TOOLOPS_AGENT_RATE_LIMIT_PER_MINUTE}"
    )
# The MCP server (/mcp/, docs/agents.md): how long a tools/call waits for a reviewer
# before answering that it waits (the API's long-poll cap), and how long an idle
# session lives.
TOOLOPS_MCP_WAIT_S = envfloat("TOOLOPS_MCP_WAIT_S", 30.0)
if not 0 <= TOOLOPS_MCP_WAIT_S <= 30:
    raise ImproperlyConfigured(
        f"TOOLOPS_MCP_WAIT_S must be 0 to 30 seconds, got {os.getenv('TOOLOPS_MCP_WAIT_S')!r}"
    )
TOOLOPS_MCP_IDLE_S = envfloat("TOOLOPS_MCP_IDLE_S", 300.0)
if not 0 < TOOLOPS_MCP_IDLE_S < 10**7:
    raise ImproperlyConfigured(
        f"TOOLOPS_MCP_IDLE_S must be a positive number of seconds, "
        f"got {os.getenv('TOOLOPS_MCP_IDLE_S')!r}"
    )
# The most MCP sessions one agent may have open, on all web processes together (counted
# from the database): one agent cannot take every session the server keeps.
TOOLOPS_MCP_AGENT_MAX_SESSIONS = envint("TOOLOPS_MCP_AGENT_MAX_SESSIONS", 16)
if TOOLOPS_MCP_AGENT_MAX_SESSIONS < 1:
    raise ImproperlyConfigured(
        f"TOOLOPS_MCP_AGENT_MAX_SESSIONS must be at least 1, got {TOOLOPS_MCP_AGENT_MAX_SESSIONS}"
    )
# A database that does not answer (toolops/dbconn.py): web processes give up on a
# statement after this many seconds (0: never) and answer 503 with Retry-After.
TOOLOPS_DB_ANSWER_TIMEOUT_S = envfloat("TOOLOPS_DB_ANSWER_TIMEOUT_S", 5.0)
if not 0 <= TOOLOPS_DB_ANSWER_TIMEOUT_S < 10**6:
    raise ImproperlyConfigured(
        "TOOLOPS_DB_ANSWER_TIMEOUT_S must be 0 (no deadline) or a number of seconds, "
        f"got {os.getenv('TOOLOPS_DB_ANSWER_TIMEOUT_S')!r}"
    )
# Graceful shutdown (toolops/stopping.py): after SIGTERM a web process answers /readyz 503
# and keeps serving this many seconds, so that a balancer's health checks take it out of
# rotation before its socket closes; then uvicorn finishes the requests in progress.
TOOLOPS_SHUTDOWN_DRAIN_S = envfloat("TOOLOPS_SHUTDOWN_DRAIN_S", 0.0)
if not 0 <= TOOLOPS_SHUTDOWN_DRAIN_S <= 600:  # also refuses nan and inf
    raise ImproperlyConfigured(
        "TOOLOPS_SHUTDOWN_DRAIN_S must be 0 to 600 seconds, "
        f"got {os.getenv('TOOLOPS_SHUTDOWN_DRAIN_S')!r}"
    )


def _at_least_one(name: str, default: int) -> int:
    value = envint(name, default) or 0
    if value < 1:
        raise ImproperlyConfigured(f"{name} must be at least 1, got {os.getenv(name)!r}")
    return value


# How wide JSON from outside may be (toolops/jsonbound.py, docs/security.md "Limits"):
# values in one body (every object, array, string, number and literal counts one), keys
# in one object, items in one array. Past them the request is refused before its args
# are checked against a schema or made canonical, the work that grows with them.
TOOLOPS_JSON_MAX_VALUES = _at_least_one("TOOLOPS_JSON_MAX_VALUES", 20_000)
TOOLOPS_JSON_MAX_KEYS = _at_least_one("TOOLOPS_JSON_MAX_KEYS", 1_000)
TOOLOPS_JSON_MAX_ITEMS = _at_least_one("TOOLOPS_JSON_MAX_ITEMS", 10_000)
# Fairness counted in work, not only requests (toolops/api/work.py): each agent's request
# bodies are priced in units (one per JSON value, one per 64 bytes) against a budget that
# refills at this rate, up to the burst; an agent that has spent past it gets 429 with
# Retry-After until the budget is back. Counted per web process: it guards that
# process's CPU.
TOOLOPS_AGENT_WORK_PER_S = _at_least_one("TOOLOPS_AGENT_WORK_PER_S", 50_000)
TOOLOPS_AGENT_WORK_BURST = _at_least_one("TOOLOPS_AGENT_WORK_BURST", 200_000)
