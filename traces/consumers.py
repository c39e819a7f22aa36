"""The WebSocket behind a run's live page (traces/live.py): one group per run, told of
changes only; the page fetches its live region again, with its own access checks. Access
is checked at connect and again on every message (toolops/consumers.py)."""

from __future__ import annotations

from toolops.consumers import LiveConsumer
from toolops.permissions import can_view_console

from .live import run_group


class RunConsumer(LiveConsumer):
    """`/ws/runs/<pk>/`: every console user may read every run."""

    allowed = staticmethod(can_view_console)

    async def connect(self) -> None:
        self.group = run_group(int(self.scope["url_route"]["kwargs"]["pk"]))
        await super().connect()
