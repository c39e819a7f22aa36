"""The agent policy on `/metrics`: decisions per rule and action, spend per limit."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from rest_framework.test import APIClient

from tests.conftest import Shop
from tests.toolops.api.helpers import create_run, post_call
from tests.toolops.policy.helpers import apply_policy
from tests.traces.metrics_scenario import samples

pytestmark = pytest.mark.django_db

POLICY = """
[[rule]]
name = "big reservations"
agents = ["*"]
tools = ["reserve_stock"]
when = 'context.args.qty > 5'
action = "refuse"

[[rule]]
name = "watch reservations"
agents = ["*"]
tools = ["reserve_stock"]
when = 'context.args.qty > 1'
action = "approve"
mode = "log_only"

[[limit]]
name = "charges per day"
agents = ["*"]
tools = ["charge"]
sum = "amount"
max = "500.00"
per = "day"
on_exceed = "approve"
"""


def test_it_counts_decisions_per_rule_and_action_and_spend_per_limit(
    api: APIClient, shop: Shop
) -> None:
    apply_policy(POLICY)
    create_run(api, "r-1")
    for step, qty in enumerate((1, 2, 3, 9)):
        post_call(
            api, "r-1", step_index=step, tool="reserve_stock", args={"sku": "A12", "qty": qty}
        )
    post_call(
        api,
        "r-1",
        step_index=9,
        tool="charge",
        args={"order_id": "o", "amount": "120.50", "currency": "eur"},
    )

    got: dict[Any, float] = samples(Client().get("/metrics").content.decode())

    decisions = "toolops_policy_decisions_total"
    assert got[(decisions, (("action", "refuse"), ("rule", "big reservations")))] == 1
    # qty 2, 3 and 9 match the log_only rule; 9 is refused as well.
    assert got[(decisions, (("action", "would_approve"), ("rule", "watch reservations")))] == 3
    spend = (
        "toolops_policy_spend",
        (("agent", "agent-a"), ("currency", "EUR"), ("limit", "charges per day")),
    )
    assert got[spend] == 120.5
    assert got[("toolops_policy_spend_max", (("limit", "charges per day"),))] == 500.0
