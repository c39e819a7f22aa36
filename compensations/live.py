"""Live updates of the support desk (toolops/live.py): pushed over Channels when
REDIS_URL is set, polled otherwise."""

from __future__ import annotations

from toolops import live

GROUP = "tickets"
# The desk's WebSocket, for the page's data-push attribute.
PUSH_PATH = "/ws/tickets/"


def tickets_changed(*, ticket_id: int) -> None:
    live.changed(group=GROUP, item=ticket_id)
