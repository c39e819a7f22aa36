"""Helpers for the policy tests that drive calls through the API: a call and its answer,
a limit's counter, and a reviewer's decision through the approvals service."""

from __future__ import annotations

from decimal import Decimal
from typing import Any
from unittest.mock import patch

from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from tests.console.conftest import make_user
from tests.toolops.api.helpers import body, post_call
from toolops.approvals.services import approval_decide
from toolops.models import Approval, ToolCall
from toolops.policy.limits import SCALE
from toolops.policy.models import SpendCounter

# A rule that lifts the catalog's approval of `charge`, so its calls run at once.
CHARGES_RUN = """
[[rule]]
name = "charges run"
agents = ["*"]
tools = ["charge"]
when = 'true'
action = "no_approval"
"""


def call(client: APIClient, step: int, tool: str, run_id: str = "r-1", **args: Any) -> Any:
    """The call object the API answers for one call (decided or held)."""
    response = post_call(client, run_id, step_index=step, tool=tool, args=args)
    assert response.status_code in (200, 202), response.content
    return body(response)


def units(limit: str, period: str | None = None) -> int:
    """What the agent has spent under `limit` (all its periods and currencies), in units."""
    rows = SpendCounter.objects.filter(limit=limit)
    if period is not None:
        rows = rows.filter(period=period)
    return sum(rows.values_list("spent", flat=True))


def money(amount: str) -> int:
    """A sum limit's units for an amount ("60.00" → 600000)."""
    return int(Decimal(amount) * SCALE)


def reviewer(name: str) -> Any:
    """A member of the reviewers group."""
    return make_user(get_user_model(), name, "reviewers")


def decide(call_id: str, who: Any, *, approve: bool, note: str = "") -> Approval:
    """One reviewer's decision on the call's approval, through the service the console
    uses; the worker's message goes nowhere (a test runs the task body itself)."""
    approval = ToolCall.objects.get(call_id=call_id).approval
    assert approval is not None, f"{call_id} waits for no approval"
    with patch("toolops.tasks.execute_approved_call.delay", autospec=True):
        return approval_decide(
            approval=approval, by=who, approve=approve, note=note, args_hash=approval.args_hash
        )
