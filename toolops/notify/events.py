"""Recording an event: one INSERT … ON CONFLICT DO NOTHING in the caller's transaction,
cheap enough for the executor's hold and the breaker's trip. Its key makes it once-only:
the same event recorded again inserts nothing and wakes nothing. The worker is woken
after commit (toolops/queue.py), so a rolled-back hold sends nothing; everything slow
(recipients, the message, sending) is the worker's (toolops/notify/outbox.py)."""

from __future__ import annotations

from django.db import connection
from django.utils import timezone

from toolops.notify.models import Kind, NotificationEvent
from toolops.queue import NOTIFY_EVENT, enqueue_on_commit

_INSERT = (
    f"INSERT INTO {NotificationEvent._meta.db_table} "
    '("key", "kind", "ref", "created_at", "subject", "text", "fields", "link", "note") '
    "VALUES (%s, %s, %s, %s, '', '', '[]', '', '') ON CONFLICT (\"key\") DO NOTHING RETURNING id"
)


def record(*, kind: str, key: str, ref: str) -> bool:
    """Record the event `key` once and have the worker send it after commit. False when
    it was recorded before (nothing more happens)."""
    with connection.cursor() as cursor:
        cursor.execute(_INSERT, [key[:200], kind, ref[:128], timezone.now()])
        row = cursor.fetchone()
    if row is None:
        return False
    enqueue_on_commit(NOTIFY_EVENT, int(row[0]))
    return True


def approval_waiting(*, approval_id: str) -> bool:
    return record(
        kind=Kind.APPROVAL_WAITING, key=f"approval_waiting:{approval_id}", ref=approval_id
    )


def approval_expiring(*, approval_id: str) -> bool:
    key = f"approval_expiring:{approval_id}"
    return record(kind=Kind.APPROVAL_EXPIRING, key=key, ref=approval_id)


def ticket_opened(*, ticket_pk: int, opening: int) -> bool:
    """`opening`: the ticket event that opened (or reopened) it: each opening once."""
    key = f"ticket_opened:{ticket_pk}:{opening}"
    return record(kind=Kind.TICKET_OPENED, key=key, ref=str(ticket_pk))


def ticket_unassigned(*, ticket_pk: int) -> bool:
    """Once per ticket: a reminder, not a nag."""
    key = f"ticket_unassigned:{ticket_pk}"
    return record(kind=Kind.TICKET_UNASSIGNED, key=key, ref=str(ticket_pk))


def breaker_opened(*, tool: str, opened_at: str) -> bool:
    """Once per opening of the breaker: `opened_at` (its time, as text) tells them apart."""
    return record(kind=Kind.BREAKER_OPENED, key=f"breaker_opened:{tool}:{opened_at}", ref=tool)
