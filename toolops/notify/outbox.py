"""The worker's side of notifications: an event's message and recipients worked out
once (fan-out), then each recipient's due deliveries claimed and sent as one message,
retried with backoff, and whatever a lost message or a dead worker left behind found by
the sweep.

Once-only under several workers: the fan-out holds the event's row lock and writes
`fanned_out_at` in the same transaction as the deliveries; a send claims its deliveries
with a conditional UPDATE (pending → sending, stamped with the message's id), so two
workers woken for the same recipient send disjoint sets, usually one empty."""

from __future__ import annotations

import logging
import secrets
from collections.abc import Sequence
from datetime import timedelta
from functools import partial

from django.conf import settings
from django.core.mail import BadHeaderError
from django.db import DatabaseError, transaction
from django.db.models import F
from django.db.models.functions import Now
from django.utils import timezone

from toolops.notify import content, email, recipients, webhook
from toolops.notify.clean import header_value, one_line
from toolops.notify.email import SendFailed
from toolops.notify.links import signed
from toolops.notify.models import NotificationDelivery, NotificationEvent
from toolops.queue import NOTIFY_DELIVER, task

log = logging.getLogger("toolops.notify")
Delivery = NotificationDelivery
Status = NotificationDelivery.Status
Channel = NotificationDelivery.Channel
# Deliveries one message lists at most; more wait for the next.
FOLD_MAX = 20
UNWRITTEN_EVENT = (
    "ToolOps could not write this message from what it is about, so nothing was sent "
    "(the worker's log has the error)."
)


def wake(channel: str, target: str, *, after_s: float) -> None:
    """Ask a worker to send `target`'s due deliveries in `after_s` seconds."""
    task(NOTIFY_DELIVER).apply_async((channel, target), countdown=max(0.0, after_s))


def event_fan_out(*, event_pk: int) -> int:
    """Work out the event's message and recipients and queue one delivery per recipient
    and channel; each recipient's send waits out the folding window. Safe to run twice:
    the second finds `fanned_out_at` set. Returns the deliveries made."""
    with transaction.atomic():
        event = (
            NotificationEvent.objects.select_for_update()
            .filter(pk=event_pk, fanned_out_at__isnull=True)
            .first()
        )
        if event is None:
            return 0
        targets = _fan_out(event)
    window = settings.TOOLOPS_NOTIFY_WINDOW_S
    for channel, target in targets:
        transaction.on_commit(partial(wake, channel, target, after_s=window))
    return len(targets)


def _fan_out(event: NotificationEvent) -> list[tuple[str, str]]:
    event.fanned_out_at = timezone.now()
    try:
        message = content.build(event)
    except content.Moot as moot:
        return _nothing_sent(event, str(moot))
    except DatabaseError:
        raise  # the database's trouble, not the event's: the sweep tries it again
    except Exception:
        # A state the message cannot be written from. Said once, and the event is done
        # with: raised, it would roll back and fail again on every sweep, and stop the
        # sweep's pass at this event each time.
        log.exception("notify: %s could not be written", event.key)
        return _nothing_sent(event, UNWRITTEN_EVENT)
    # Stored clean: the outbox page, every channel and every later send read these.
    event.subject, event.text = header_value(message.subject, 300), one_line(message.text)
    event.link = message.link[:500]
    event.fields = [[one_line(label), one_line(value)] for label, value in message.fields]
    targets = [
        (Channel.EMAIL, address, user) for user, address in recipients.email_recipients(event.kind)
    ]
    targets += [(Channel.WEBHOOK, hook, None) for hook in recipients.webhooks_for(event.kind)]
    if not targets:
        event.note = "Nobody receives this kind (no one opted in, and no webhook)."
    event.save(update_fields=["fanned_out_at", "subject", "text", "link", "fields", "note"])
    Delivery.objects.bulk_create(
        [Delivery(event=event, channel=c, target=t, user=u) for c, t, u in targets],
        ignore_conflicts=True,
    )
    log.info(
        "notify: %s queued for %s",
        event.key,
        ", ".join(f"{c}:{t}" for c, t, _ in targets) or "nobody",
    )
    return [(c, t) for c, t, _ in targets]


def _nothing_sent(event: NotificationEvent, why: str) -> list[tuple[str, str]]:
    event.note = why[:300]
    event.save(update_fields=["fanned_out_at", "note"])
    log.info("notify: %s not sent: %s", event.key, event.note)
    return []


def delivery_retry(*, delivery_pk: int) -> bool:
    """An operator sends a failed delivery again (after fixing a webhook or an address):
    due at once, with its tries counted afresh. False when it had not failed (nothing
    changed)."""
    delivery = Delivery.objects.filter(pk=delivery_pk).first()
    if delivery is None:
        return False
    again = Delivery.objects.filter(pk=delivery_pk, status=Status.FAILED).update(
        status=Status.PENDING, attempts=0, next_attempt_at=timezone.now(), lease_until=None
    )
    if again:
        transaction.on_commit(lambda: wake(delivery.channel, delivery.target, after_s=0))
    return again == 1


def deliveries_send(*, channel: str, target: str) -> int:
    """Send `target`'s due deliveries on `channel` as one message. Returns how many went
    out (0 when another worker took them, or none is due).

    A failure to deliver (SendFailed: the mail server, the webhook) fails the message: each
    of its deliveries is tried again after its backoff. Any other error came from what the
    message says, which one event's values may have caused: its deliveries are sent one by
    one, so that the others arrive, and one that fails alone is `failed` at once (written
    again, it would fail the same way)."""
    message_id = secrets.token_hex(8)
    claimed = _claim(channel, target, message_id)
    if not claimed:
        return 0
    try:
        _send(channel, target, claimed, message_id)
    except SendFailed as failure:
        _failed(claimed, str(failure))
        return 0
    except Exception as error:
        if len(claimed) == 1:
            _unwritable(claimed[0], error)
            return 0
        log.warning(
            "notify: the message to %s:%s could not be written (%s): sending its %d events "
            "one by one",
            channel,
            target,
            type(error).__name__,
            len(claimed),
        )
        return _send_one_by_one(channel, target, claimed)
    _sent(claimed, message_id)
    return len(claimed)


def _send(
    channel: str, target: str, deliveries: Sequence[NotificationDelivery], message_id: str
) -> None:
    events = [d.event for d in deliveries]
    if channel == Channel.EMAIL:
        links = {d.event_id: signed(d.event.link, d.pk) for d in deliveries if d.event.link}
        email.send(address=target, events=events, links=links)
    else:
        webhook.send(group=target, events=events, message_id=message_id)


def _send_one_by_one(channel: str, target: str, claimed: Sequence[NotificationDelivery]) -> int:
    sent = 0
    for n, delivery in enumerate(claimed):
        message_id = secrets.token_hex(8)
        try:
            _send(channel, target, [delivery], message_id)
        except SendFailed as failure:
            # The way out failed meanwhile: this one and the rest are tried again later.
            _failed(claimed[n:], str(failure))
            break
        except Exception as error:
            _unwritable(delivery, error)
            continue
        _sent([delivery], message_id)
        sent += 1
    return sent


def _sent(deliveries: Sequence[NotificationDelivery], message_id: str) -> None:
    # Still ours: the claim's stamp (a row whose lease ran out may be another's now).
    Delivery.objects.filter(
        pk__in=[d.pk for d in deliveries], batch=deliveries[0].batch, status=Status.SENDING
    ).update(
        status=Status.SENT,
        batch=message_id,
        sent_at=timezone.now(),
        lease_until=None,
        last_error="",
    )
    keys = ", ".join(d.event.key for d in deliveries)
    first = deliveries[0]
    log.info(
        "notify: sent %s to %s:%s in one message (%s)",
        keys,
        first.channel,
        first.target,
        message_id,
    )


def unwritable_reason(error: Exception) -> str:
    """The outbox's sentence for a message that failed because of what it says."""
    if isinstance(error, BadHeaderError):
        what = "a value in it cannot go in a mail header"
    elif isinstance(error, UnicodeError):
        what = "a value in it is not text that can be encoded"
    else:
        what = "its content could not be written out"
    return (
        f"Not sent: {what}. Sent on its own it failed the same way, so it is not tried "
        "again (the worker's log has the details)."
    )


def _unwritable(delivery: NotificationDelivery, error: Exception) -> None:
    why = unwritable_reason(error)
    where = f"{delivery.channel}:{delivery.target}"
    log.warning("notify: gave up on %s to %s: %s", delivery.event.key, where, why, exc_info=error)
    Delivery.objects.filter(pk=delivery.pk, batch=delivery.batch, status=Status.SENDING).update(
        status=Status.FAILED, last_error=why, lease_until=None
    )


def _claim(channel: str, target: str, message_id: str) -> Sequence[NotificationDelivery]:
    now = timezone.now()
    due = list(
        Delivery.objects.filter(
            channel=channel, target=target, status=Status.PENDING, next_attempt_at__lte=now
        )
        .order_by("created_at", "pk")
        .values_list("pk", flat=True)[:FOLD_MAX]
    )
    if not due:
        return []
    # Conditional: a row another worker claimed meanwhile is no longer pending.
    Delivery.objects.filter(pk__in=due, status=Status.PENDING).update(
        status=Status.SENDING,
        batch=message_id,
        attempts=F("attempts") + 1,
        lease_until=Now() + timedelta(seconds=settings.TOOLOPS_NOTIFY_LEASE_S),
    )
    return list(
        Delivery.objects.filter(batch=message_id, status=Status.SENDING)
        .select_related("event")
        .order_by("created_at", "pk")
    )


def retry_delay_s(attempts: int) -> float:
    """Exponential backoff: base, 2×base, 4×base, … capped."""
    base = settings.TOOLOPS_NOTIFY_RETRY_BASE_S
    return min(settings.TOOLOPS_NOTIFY_RETRY_CAP_S, base * 2 ** max(0, attempts - 1))


def _failed(claimed: Sequence[NotificationDelivery], error: str) -> None:
    """Each delivery of the message is tried again after its backoff, or given up after
    TOOLOPS_NOTIFY_MAX_ATTEMPTS (then `failed`, its error shown on the outbox page)."""
    first, limit = claimed[0], settings.TOOLOPS_NOTIFY_MAX_ATTEMPTS
    now, error = timezone.now(), error[:500]
    mine = Delivery.objects.filter(pk__in=[d.pk for d in claimed], status=Status.SENDING)
    gave_up = mine.filter(attempts__gte=limit).update(
        status=Status.FAILED, last_error=error, lease_until=None
    )
    again = [d.attempts for d in claimed if d.attempts < limit]
    if gave_up:
        log.info(
            "notify: gave up on %s:%s after %d attempts: %s",
            first.channel,
            first.target,
            limit,
            error,
        )
    if not again:
        return
    delay = retry_delay_s(max(again))
    mine.update(
        status=Status.PENDING,
        last_error=error,
        lease_until=None,
        next_attempt_at=now + timedelta(seconds=delay),
    )
    log.info(
        "notify: attempt %d to %s:%s failed: %s Trying again in %g s.",
        max(again),
        first.channel,
        first.target,
        error,
        delay,
    )
    wake(first.channel, first.target, after_s=delay)
