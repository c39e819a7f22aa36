"""Live console pages. With REDIS_URL set, the worker and every web process share a
Channels layer: a change is pushed to the open pages of its group at once, and each page
fetches its live region again. On the one-machine default there is no layer shared
between processes, and the pages poll instead (`pushed()` says which)."""

from __future__ import annotations

import logging
from typing import Literal, TypedDict

from django.conf import settings
from django.db import transaction

log = logging.getLogger(__name__)


class Changed(TypedDict):
    type: Literal["live.changed"]
    item: int


def pushed() -> bool:
    """Whether pages are told of changes (True), or poll for them (False)."""
    return bool(settings.REDIS_URL)


def changed(*, group: str, item: int) -> None:
    """Tell the open pages of `group` that `item` changed, once the change is committed."""
    if not pushed():
        return
    transaction.on_commit(lambda: _send(group, item))


def _send(group: str, item: int) -> None:
    from asgiref.sync import async_to_sync
    from channels.layers import get_channel_layer

    layer = get_channel_layer()
    if layer is None:
        return
    message: Changed = {"type": "live.changed", "item": item}
    try:
        async_to_sync(layer.group_send)(group, message)
    except Exception:  # noqa: BLE001 - a page that misses a push still shows it on reload
        log.warning("could not push a change to %s", group, exc_info=True)
