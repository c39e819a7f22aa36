"""Live updates of the support desk. With REDIS_URL set, the worker and every web
process share a Channels layer, and a change is pushed to the open pages at once; on the
one-machine default there is no shared layer between processes, and the pages poll."""

from __future__ import annotations

from typing import Literal, TypedDict

from django.conf import settings
from django.db import transaction

GROUP = "tickets"


class TicketsChanged(TypedDict):
    type: Literal["tickets.changed"]
    ticket_id: int


def pushed() -> bool:
    """Whether pages are told of changes (True), or poll for them (False)."""
    return bool(settings.REDIS_URL)


def tickets_changed(*, ticket_id: int) -> None:
    """Tell open desk pages that a ticket changed, once the change is committed."""
    if not pushed():
        return
    transaction.on_commit(lambda: _send(ticket_id))


def _send(ticket_id: int) -> None:
    from asgiref.sync import async_to_sync
    from channels.layers import get_channel_layer

    layer = get_channel_layer()
    if layer is None:
        return
    message: TicketsChanged = {"type": "tickets.changed", "ticket_id": ticket_id}
    try:
        async_to_sync(layer.group_send)(GROUP, message)
    except Exception:  # noqa: BLE001 - a page that misses a push still shows it on reload
        import logging

        logging.getLogger(__name__).warning("could not push a ticket change", exc_info=True)
