"""Pushes "a ticket changed" to open support-desk pages (with REDIS_URL)."""

from __future__ import annotations

from compensations.live import GROUP
from toolops.consumers import LiveConsumer
from toolops.permissions import can_work_tickets


class TicketsConsumer(LiveConsumer):
    group = GROUP
    allowed = staticmethod(can_work_tickets)
