"""The desk's WebSocket (/ws/tickets/): support staff are told of ticket changes; anyone
else is refused at connect, and a session that loses access is closed on the next push."""

from __future__ import annotations

import json
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from asgiref.testing import ApplicationCommunicator
from channels.layers import get_channel_layer

from compensations.consumers import TicketsConsumer
from compensations.live import GROUP

pytestmark = pytest.mark.django_db(transaction=True)


async def connect(user: Any) -> tuple[ApplicationCommunicator, bool]:
    # channels.testing needs daphne; the ASGI messages are simple enough to send by hand.
    scope = {
        "type": "websocket",
        "path": "/ws/tickets/",
        "headers": [],
        "subprotocols": [],
        "user": user,
    }
    communicator = ApplicationCommunicator(TicketsConsumer.as_asgi(), scope)
    await communicator.send_input({"type": "websocket.connect"})
    answer = await communicator.receive_output(timeout=2)
    return communicator, answer["type"] == "websocket.accept"


def test_support_receives_a_push_and_a_reviewer_is_refused(support: Any, reviewer: Any) -> None:
    import asyncio

    async def scenario() -> None:
        desk, ok = await connect(support)
        assert ok
        _, refused = await connect(reviewer)
        assert not refused

        await get_channel_layer().group_send(GROUP, {"type": "live.changed", "item": 7})
        sent = await desk.receive_output(timeout=2)
        assert json.loads(sent["text"]) == {"type": "live.changed", "group": "tickets", "item": 7}

        # Removed from support since connecting: the next push closes the socket instead.
        await sync_to_async(support.groups.clear)()
        await get_channel_layer().group_send(GROUP, {"type": "live.changed", "item": 8})
        closed = await desk.receive_output(timeout=2)
        assert closed == {"type": "websocket.close", "code": 4403}
        await desk.send_input({"type": "websocket.disconnect", "code": 4403})
        await desk.wait(timeout=2)

    asyncio.run(scenario())
