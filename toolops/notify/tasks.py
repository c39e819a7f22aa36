"""The worker's notification tasks (toolops/notify/outbox.py does the work). Each loads
by key and is safe to deliver twice: the fan-out and the send claim their rows first."""

from __future__ import annotations

from celery import shared_task

from toolops.notify import outbox, watch


@shared_task(acks_late=True)
def notify_event(event_pk: int) -> int:
    """An event was recorded: work out its message and recipients, queue the sends."""
    return outbox.event_fan_out(event_pk=event_pk)


@shared_task(acks_late=True)
def notify_deliver(channel: str, target: str) -> int:
    """Send one recipient's due deliveries on one channel, folded into one message."""
    return outbox.deliveries_send(channel=channel, target=target)


@shared_task(acks_late=True)
def notify_sweep() -> int:
    """Approvals about to expire, tickets nobody took, and what lost messages left."""
    return watch.sweep()
