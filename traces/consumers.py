"""Live run updates for the console."""

from __future__ import annotations

from typing import Any, Literal, TypedDict

from channels.generic.websocket import AsyncJsonWebsocketConsumer

GROUP = "runs"


class RunUpdated(TypedDict):
    type: Literal["run.updated"]
    run_id: str
    status: str


class RunsConsumer(AsyncJsonWebsocketConsumer):
    async def connect(self) -> None:
        if not self._allowed():
            await self.close(code=4401)
            return
        await self.channel_layer.group_add(GROUP, self.channel_name)
        await self.accept()

    async def disconnect(self, code: int) -> None:
        await self.channel_layer.group_discard(GROUP, self.channel_name)

    async def run_updated(self, event: RunUpdated) -> None:
        # Checked again per message: a session may have ended since connect.
        if not self._allowed():
            await self.close(code=4401)
            return
        await self.send_json({"run_id": event["run_id"], "status": event["status"]})

    def _allowed(self) -> bool:
        user: Any = self.scope.get("user")
        return bool(user is not None and user.is_authenticated and user.is_active)
