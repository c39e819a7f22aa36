"""A run page's WebSocket (/ws/runs/<pk>/): console users are told of that run's changes
and no other's; anyone else is refused at connect, and a user who loses access is closed
on the next push."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from asgiref.testing import ApplicationCommunicator
from channels.layers import get_channel_layer
from channels.routing import URLRouter

from tests.console.conftest import make_user
from traces.live import run_group
from traces.routing import websocket_urlpatterns

pytestmark = pytest.mark.django_db(transaction=True)


async def connect(user: Any, pk: int) -> tuple[ApplicationCommunicator, bool]:
    # Through the app's own routes; channels.testing needs daphne, and the ASGI messages
    # are simple enough to send by hand.
    scope = {
        "type": "websocket",
        "path": f"/ws/runs/{pk}/",
        "headers": [],
        "subprotocols": [],
        "user": user,
    }
    communicator = ApplicationCommunicator(URLRouter(websocket_urlpatterns), scope)
    await communicator.send_input({"type": "websocket.connect"})
    answer = await communicator.receive_output(timeout=2)
    return communicator, answer["type"] == "websocket.accept"


def test_a_console_user_hears_of_their_run_only_and_others_are_refused(
    django_user_model: Any,
) -> None:
    rita = make_user(django_user_model, "rita", "reviewers")
    otto = make_user(django_user_model, "otto")  # in no console group

    async def scenario() -> None:
        page, ok = await connect(rita, 5)
        assert ok
        _, refused = await connect(otto, 5)
        assert not refused

        layer = get_channel_layer()
        await layer.group_send(run_group(6), {"type": "live.changed", "item": 6})
        await layer.group_send(run_group(5), {"type": "live.changed", "item": 5})
        sent = await page.receive_output(timeout=2)
        assert json.loads(sent["text"]) == {"type": "live.changed", "group": "run-5", "item": 5}
        assert await page.receive_nothing(timeout=0.2)

        # Removed from every console group since connecting: the next push closes it.
        await sync_to_async(rita.groups.clear)()
        await layer.group_send(run_group(5), {"type": "live.changed", "item": 5})
        closed = await page.receive_output(timeout=2)
        assert closed == {"type": "websocket.close", "code": 4403}
        await page.send_input({"type": "websocket.disconnect", "code": 4403})
        await page.wait(timeout=2)

    asyncio.run(scenario())
