"""The Redis broker: kombu's Redis transport, made to survive a closed connection.

When Redis goes away (a restart, a network cut) while a worker holds unacknowledged
messages (late acks: a task still running), Celery drops the broken connection: it
closes it once (kombu then clears the connection off its transport) and once more, and
the second close hands the held messages back to Redis. kombu's Redis channel then builds
a new connection pool from the cleared connection and fails with AttributeError
(`'NoneType' object has no attribute 'hostname'`), which is no connection error: the
worker exits ("Unrecoverable error"). A task that finishes later acks on that closed
channel and fails the same way.

Here a channel whose connection was closed raises redis' ConnectionError instead, which
kombu and Celery expect and handle (a task that finishes afterwards is logged as not
acknowledged, and the worker carries on), and it does not try to hand its held messages back:
they are left in Redis, whose visibility timeout redelivers them if it kept them, and
the database sweeps find whatever work a Redis that lost them leaves undone (the broker
only wakes workers; the database is the queue). Registered in settings as
CELERY_BROKER_TRANSPORT for a redis:// broker URL (toolops/conf/redis.py).
"""

from __future__ import annotations

import logging
from typing import Any

from kombu.transport import redis as kombu_redis
from redis.exceptions import ConnectionError as RedisConnectionError

logger = logging.getLogger(__name__)

CLOSED = "the broker connection of this channel is closed"


def closed(channel: Any) -> bool:
    """Whether `channel`'s connection was closed: kombu unsets the channel's transport
    when the channel closes, and the transport's connection when the connection does."""
    return channel.connection is None or channel.connection.client is None


class QoS(kombu_redis.QoS):
    def restore_unacked(self, client: Any = None) -> None:
        if client is None and closed(self.channel):
            # Set by QoS.__init__: None is only the class's default (and its stubs' type).
            delivered: dict[str, Any] = self._delivered or {}
            logger.warning(
                "%s: %d unacknowledged message(s) left in Redis (redelivered after its "
                "visibility timeout if it kept them) and to the database sweeps",
                CLOSED,
                len(delivered),
            )
            delivered.clear()
            return
        super().restore_unacked(client)


class Channel(kombu_redis.Channel):
    QoS = QoS

    def _connparams(self, asynchronous: bool = False) -> dict[str, Any]:
        if closed(self):
            raise RedisConnectionError(CLOSED)
        # kombu's own method, which celery-types' kombu stubs leave out.
        return super()._connparams(asynchronous=asynchronous)  # type: ignore[misc]


class Transport(kombu_redis.Transport):
    Channel = Channel
