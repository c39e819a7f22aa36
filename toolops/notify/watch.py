"""The notifications' periodic sweep: events and deliveries a lost message or a dead
worker left behind, and the two events nobody's action causes — an approval about to
expire, a ticket nobody took.

"About to expire": less than a fifth of the approval's time to live is left, and at most
5 minutes (EXPIRING_MAX); a 30-minute approval is announced again 5 minutes before its
end, a 20-second one 4 seconds before (if the sweep passes then: its waiting notice
already said how long it had). "Nobody took it": open and unassigned for
TOOLOPS_NOTIFY_TICKET_UNASSIGNED_S, told once per ticket."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models.functions import Now
from django.utils import timezone

from compensations.models import Ticket
from toolops.approvals.models import Approval
from toolops.notify import events
from toolops.notify.models import NotificationDelivery, NotificationEvent
from toolops.notify.outbox import event_fan_out, wake

EXPIRING_MAX = timedelta(minutes=5)
SENDER_DIED = "The worker sending it stopped before it finished; it is sent again."
SENDER_DIED_LAST = (
    "The worker sending it stopped before it finished, on its last try too: not sent."
)
Status = NotificationDelivery.Status
BATCH = 200
log = logging.getLogger("toolops.notify")


def sweep() -> int:
    """One pass; returns how many things it started."""
    now = timezone.now()
    grace = timedelta(seconds=settings.TOOLOPS_NOTIFY_GRACE_S)
    started = approvals_expiring(now=now) + tickets_unassigned(now=now)
    lost = NotificationEvent.objects.filter(fanned_out_at__isnull=True, created_at__lt=now - grace)
    for pk in lost.order_by("created_at").values_list("pk", flat=True)[:BATCH]:
        started += bool(event_fan_out(event_pk=pk))
    senders_died(now=now)
    overdue = (
        NotificationDelivery.objects.filter(status=Status.PENDING, next_attempt_at__lt=now - grace)
        .values_list("channel", "target")
        .distinct()
    )
    for channel, target in list(overdue)[:BATCH]:
        wake(channel, target, after_s=0)
        started += 1
    return started


def senders_died(*, now: datetime) -> int:
    """Deliveries whose sender died mid-send (a `sending` row past its lease). Each claim
    counted a try: one with tries left is due again (sent at most twice, never lost: a
    message that went out before the death is sent once more); one on its last try is
    `failed`, so that a message that kills its worker every time ends instead of being
    taken up forever. Both say so in the outbox. Returns how many were failed."""
    dead = NotificationDelivery.objects.filter(status=Status.SENDING, lease_until__lt=Now())
    limit = settings.TOOLOPS_NOTIFY_MAX_ATTEMPTS
    failed = dead.filter(attempts__gte=limit).update(
        status=Status.FAILED, lease_until=None, last_error=SENDER_DIED_LAST
    )
    dead.update(
        status=Status.PENDING, next_attempt_at=now, lease_until=None, last_error=SENDER_DIED
    )
    if failed:
        log.info("notify: gave up on %d deliveries whose sender died on their last try", failed)
    return failed


def approvals_expiring(*, now: datetime) -> int:
    soon = Approval.objects.pending().filter(expires_at__gt=now, expires_at__lte=now + EXPIRING_MAX)
    due = [
        approval_id
        for approval_id, created, expires in soon.values_list(
            "approval_id", "created_at", "expires_at"
        )[:BATCH]
        if expires - now <= (expires - created) / 5
    ]
    told = _told("approval_expiring", due)
    return sum(events.approval_expiring(approval_id=a) for a in due if a not in told)


def tickets_unassigned(*, now: datetime) -> int:
    since = now - timedelta(seconds=settings.TOOLOPS_NOTIFY_TICKET_UNASSIGNED_S)
    # A snoozed ticket is put aside on purpose: reminded of once its snooze ends.
    waiting = Ticket.objects.awake(now).filter(assignee__isnull=True, opened_at__lte=since)
    pks = list(waiting.order_by("opened_at").values_list("pk", flat=True)[:BATCH])
    told = _told("ticket_unassigned", [str(pk) for pk in pks])
    return sum(events.ticket_unassigned(ticket_pk=pk) for pk in pks if str(pk) not in told)


def _told(kind: str, refs: list[str]) -> set[str]:
    keys = [f"{kind}:{ref}" for ref in refs]
    found = NotificationEvent.objects.filter(key__in=keys).values_list("key", flat=True)
    return {key.split(":", 1)[1] for key in found}
