"""The worker's side of approvals, with a real Celery worker process: an approval nobody
decides ends `expired` by the periodic task, and an approved call whose message was lost
is still run — once."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from unittest.mock import patch

from rest_framework.test import APIClient

from tests.conftest import Shop
from tests.console.conftest import make_user
from tests.toolops.api.helpers import body, create_run, post_call
from tests.worker import Worker, wait_for
from toolops.approvals.services import approval_decide
from toolops.models import Approval, ToolCall, ToolPolicy

CHARGE = {"order_id": "ord-9", "amount": "199.00"}
FAST = {"TOOLOPS_APPROVAL_SWEEP_S": "0.5", "TOOLOPS_APPROVAL_GRACE_S": "1"}


def held_charge(api: APIClient) -> dict[str, Any]:
    create_run(api)
    response = post_call(api, step_index=0, tool="charge", args=CHARGE)
    assert response.status_code == 202, response.content
    return body(response)


def test_an_approval_nobody_decides_expires_and_nothing_runs(
    worker: Callable[..., Worker], api: APIClient, shop: Shop
) -> None:
    ToolPolicy.objects.create(tool="charge", approval_ttl_s=1)
    call = held_charge(api)

    w = worker(**FAST)
    wait_for(lambda: ToolCall.objects.get(call_id=call["call_id"]).status == "rejected", 20, w)

    done = body(api.get(f"/api/v1/calls/{call['call_id']}"))
    assert (done["status"], done["error"]["reason"]) == ("rejected", "expired")
    assert done["approval"]["status"] == "expired"
    assert shop.requests() == []


def test_an_approved_call_whose_message_was_lost_still_runs_once(
    worker: Callable[..., Worker], api: APIClient, shop: Shop, django_user_model: Any
) -> None:
    rita = make_user(django_user_model, "rita", "reviewers")
    call = held_charge(api)
    approval = Approval.objects.get()
    with patch("toolops.tasks.execute_approved_call.delay", autospec=True) as lost:
        approval_decide(
            approval=approval, by=rita, approve=True, note="", args_hash=approval.args_hash
        )
    lost.assert_called_once_with(approval.pk)

    w = worker(**FAST)
    wait_for(lambda: ToolCall.objects.get(call_id=call["call_id"]).status == "succeeded", 20, w)

    assert len(shop.requests("/payments/charges")) == 1
    assert Approval.objects.get().execution_started_at is not None
