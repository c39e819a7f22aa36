"""Pushes "an approval changed" to open reviewer pages (with REDIS_URL): the queue and
each approval's page fetch their live region again (toolops/live.py)."""

from __future__ import annotations

from toolops.approvals.models import LIVE_GROUP
from toolops.consumers import LiveConsumer
from toolops.permissions import can_review

# The reviewers' WebSocket, for the page's data-push attribute (toolops/approvals/routing.py).
PUSH_PATH = "/ws/approvals/"


class ApprovalsConsumer(LiveConsumer):
    group = LIVE_GROUP
    allowed = staticmethod(can_review)
