"""Recording events: once by key, in the transaction of what caused it, the worker woken
only after commit; where the executor and the support desk record them."""

from __future__ import annotations

from contextlib import suppress
from typing import Any

import pytest
from django.db import transaction
from rest_framework.test import APIClient

from tests.compensations.conftest import dead_letter
from tests.conftest import Shop
from tests.toolops.api.helpers import create_run, post_call
from tests.toolops.test_breaker import add_flaky_tool, call
from toolops.models import Agent, Approval, NotificationEvent
from toolops.notify import events

pytestmark = pytest.mark.django_db


def keys() -> list[str]:
    return list(NotificationEvent.objects.order_by("pk").values_list("key", flat=True))


def test_it_records_an_event_once_and_wakes_the_worker_once(
    django_capture_on_commit_callbacks: Any,
) -> None:
    with django_capture_on_commit_callbacks() as woken:
        assert events.approval_waiting(approval_id="ap-1") is True
        assert events.approval_waiting(approval_id="ap-1") is False

    assert keys() == ["approval_waiting:ap-1"]
    assert len(woken) == 1


def test_a_rolled_back_event_is_not_recorded_and_wakes_nobody(
    django_capture_on_commit_callbacks: Any,
) -> None:
    with (
        django_capture_on_commit_callbacks() as woken,
        suppress(RuntimeError),
        transaction.atomic(),
    ):
        events.approval_waiting(approval_id="ap-1")
        raise RuntimeError("the hold failed")

    assert keys() == [] and woken == []


def test_a_held_call_records_its_approval_waiting(
    api: APIClient, shop: Shop, django_capture_on_commit_callbacks: Any
) -> None:
    create_run(api)
    with django_capture_on_commit_callbacks():
        held = post_call(api, step_index=0, tool="charge", args={"order_id": "o", "amount": "1"})
        assert held.status_code == 202
        # The same request again is the same held call: no second event.
        post_call(api, step_index=0, tool="charge", args={"order_id": "o", "amount": "1"})

    assert keys() == [f"approval_waiting:{Approval.objects.get().approval_id}"]


def test_a_dead_letter_records_ticket_opened(agent_a: tuple[Agent, str]) -> None:
    ticket = dead_letter(agent_a[0])

    [key] = keys()
    assert key.startswith(f"ticket_opened:{ticket.pk}:")


def test_a_breaker_opening_records_one_event_not_one_per_failure(
    api: APIClient, shop: Shop, settings: Any
) -> None:
    add_flaky_tool(settings, shop, cooldown=60)
    shop.fault("/inventory/stock", fail_next=100, fail_status=503)
    create_run(api, "r-b")

    for step in range(5):
        call(api, "r-b", step)

    [key] = keys()
    assert key.startswith("breaker_opened:flaky_stock:")
