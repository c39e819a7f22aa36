"""Settings: Redis, when REDIS_URL is set — the Channels layer that carries live pages'
pushes between processes, and the cache (in-flight counts, rate limits) they share.
Without it, each process keeps its own."""

from __future__ import annotations

import os

REDIS_URL = os.getenv("REDIS_URL", "")
if REDIS_URL:
    from redis.exceptions import ConnectionError as _RedisConnectionError

    # A pooled connection to a Redis that restarted is dead: a command on it is tried
    # once more on a fresh connection (redis-py's retry_on_error), so the first page
    # socket, push or count after a restart is not refused for it.
    _RETRY_ONCE = {"retry_on_error": [_RedisConnectionError]}
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [{"address": REDIS_URL, **_RETRY_ONCE}]},
        }
    }
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": REDIS_URL,
            "OPTIONS": _RETRY_ONCE,
        }
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}

# Celery's broker, when it is Redis: kombu's Redis transport, with a worker that outlives
# a Redis restart while it holds unacknowledged messages (toolops/broker_redis.py).
# rediss:// keeps kombu's own transport and its TLS checks.
if os.getenv("CELERY_BROKER_URL", "").startswith("redis://"):
    CELERY_BROKER_TRANSPORT = "toolops.broker_redis:Transport"
