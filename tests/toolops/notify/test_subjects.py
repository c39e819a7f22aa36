"""What a message's subject says when several events are folded into it
(toolops/notify/content.py `counted`): it counts them by what they are and names the
first, so a reader knows from the inbox how much waits."""

from __future__ import annotations

from django.utils import timezone

from toolops.notify.content import counted
from toolops.notify.models import NotificationEvent
from toolops.notify.webhook import payload


def event(kind: str, subject: str) -> NotificationEvent:
    return NotificationEvent(
        kind=kind, key=f"{kind}:x", ref="x", subject=subject, fanned_out_at=timezone.now()
    )


def test_one_event_keeps_its_own_subject() -> None:
    assert counted([event("approval_waiting", "Approval waiting: Charge 89.00 EUR")]) == (
        "Approval waiting: Charge 89.00 EUR"
    )


def test_events_of_one_kind_are_counted_by_name_and_the_first_is_named() -> None:
    events = [event("approval_waiting", f"Approval waiting: Charge {n}9.00 EUR") for n in (8, 1, 2)]

    assert counted(events) == "3 approvals wait: Charge 89.00 EUR and 2 more"


def test_a_deadline_in_the_subject_is_not_taken_for_its_end() -> None:
    # "Expires 7 Dec 2026 at 14:05 UTC: …": the time's colon is not the subject's.
    events = [event("approval_expiring", "Expires 7 Dec 2026 at 14:05 UTC: Charge 89.00 EUR")] * 2

    assert counted(events) == "2 approvals expire unless decided: Charge 89.00 EUR and 1 more"


def test_events_of_several_kinds_are_things_that_need_you() -> None:
    events = [
        event("ticket_opened", "Ticket #4: Refund 89.00 EUR was not made"),
        event("breaker_opened", "Tool switched off: charge, after 5 consecutive failures"),
    ]

    assert counted(events) == (
        "2 things need you: Ticket #4: Refund 89.00 EUR was not made and 1 more"
    )


def test_a_chat_message_of_several_events_counts_them_the_same_way() -> None:
    events = [event("approval_waiting", f"Approval waiting: Charge {n}9.00 EUR") for n in (8, 1)]
    for e in events:
        e.link, e.text, e.fields = "http://localhost:8000/console/approvals/ap-1/", "", []

    text = payload(events)["text"]

    assert text.splitlines()[0] == "2 approvals wait:"
    assert (
        "Approval waiting: Charge 89.00 EUR http://localhost:8000/console/approvals/ap-1/" in text
    )
