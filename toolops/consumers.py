"""The WebSocket behind live console pages (toolops/live.py): one per group, told of
changes only; the page re-fetches what it shows, with its own access checks. Access is
checked at connect and again on every message."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from asgiref.sync import sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.contrib.auth import get_user
from django.http import HttpRequest

from toolops.accounts.twofactor import session_may_proceed
from toolops.live import Changed

NOT_ALLOWED = 4403


class LiveConsumer(AsyncJsonWebsocketConsumer):
    group: str = ""
    allowed: Callable[[Any], bool] = staticmethod(lambda user: False)

    async def connect(self) -> None:
        if not await self._allowed():
            await self.close(code=NOT_ALLOWED)
            return
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()

    async def disconnect(self, code: int) -> None:
        await self.channel_layer.group_discard(self.group, self.channel_name)

    async def live_changed(self, event: Changed) -> None:
        # Checked again per message: the session may have ended, or the user left the group.
        if not await self._allowed():
            await self.close(code=NOT_ALLOWED)
            return
        await self.send_json({"type": "live.changed", "group": self.group, "item": event["item"]})

    async def _allowed(self) -> bool:
        # Read afresh every time: the session may have been logged out, and the user
        # removed from the group, since the socket opened.
        return bool(await sync_to_async(self._allowed_now)())

    def _allowed_now(self) -> bool:
        user: Any = self.scope.get("user")
        if "session" in self.scope:
            # get_user needs only a request's session.
            request = HttpRequest()
            request.session = self.scope["session"]
            user = get_user(request)
        elif user is not None and user.is_authenticated:
            user = type(user).objects.filter(pk=user.pk).first()
        if user is None or not user.is_authenticated or not user.is_active:
            return False
        # TOOLOPS_REQUIRE_2FA: a session its user has not verified with a code yet opens
        # no page, and no live update either (docs/accounts.md).
        if not session_may_proceed(user, self.scope.get("session")):
            return False
        return bool(type(self).allowed(user))
