"""Pushes "a ticket changed" to open support-desk pages (only with REDIS_URL: the worker
and the web processes then share a Channels layer). The page re-fetches what it shows,
so a message carries no ticket data, and access is checked for the page's own request."""

from __future__ import annotations

from typing import Any

from asgiref.sync import sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from compensations.live import GROUP, TicketsChanged
from toolops.permissions import can_work_tickets


class TicketsConsumer(AsyncJsonWebsocketConsumer):
    async def connect(self) -> None:
        if not await self._allowed():
            await self.close(code=4403)
            return
        await self.channel_layer.group_add(GROUP, self.channel_name)
        await self.accept()

    async def disconnect(self, code: int) -> None:
        await self.channel_layer.group_discard(GROUP, self.channel_name)

    async def tickets_changed(self, event: TicketsChanged) -> None:
        # Checked again per message: the session may have ended, or the user left support.
        if not await self._allowed():
            await self.close(code=4403)
            return
        await self.send_json({"type": "tickets.changed", "ticket_id": event["ticket_id"]})

    async def _allowed(self) -> bool:
        user: Any = self.scope.get("user")
        if user is None or not user.is_authenticated or not user.is_active:
            return False
        # Group membership is read from the database (and cached on the user object).
        return bool(await sync_to_async(can_work_tickets)(user))
