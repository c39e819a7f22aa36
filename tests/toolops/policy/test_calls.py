"""What the agent policy does to calls (API.md "Agent policy"), through the API against
the demo shop over HTTP."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from tests.conftest import Shop
from tests.toolops.api.helpers import body, create_run, post_call
from tests.toolops.policy.helpers import apply_policy
from toolops.models import ToolCall
from toolops.policy.models import SpendCounter

pytestmark = pytest.mark.django_db


@pytest.fixture
def run(api: APIClient, shop: Shop) -> dict[str, Any]:
    return create_run(api, "r-1")


def call(client: APIClient, step: int, tool: str, **args: Any) -> dict[str, Any]:
    response = post_call(client, "r-1", step_index=step, tool=tool, args=args)
    assert response.status_code in (200, 202), response.content
    return body(response)


def test_without_a_policy_the_call_carries_none(api: APIClient, run: Any) -> None:
    data = call(api, 0, "query_stock", sku="A12")
    assert data["status"] == "succeeded"
    assert data["policy"] is None


def test_default_deny_refuses_a_tool_no_grant_gives(api: APIClient, run: Any, shop: Shop) -> None:
    version = apply_policy(
        """
        default = "deny"
        [[grant]]
        agents = ["agent-a"]
        tools = ["query_stock"]
        """
    )
    read = call(api, 0, "query_stock", sku="A12")
    assert read["status"] == "succeeded"
    assert read["policy"] == {"version": version.number, "rules": []}

    refused = call(api, 1, "reserve_stock", sku="A12", qty=1)
    assert refused["status"] == "failed"
    assert refused["error"]["class"] == "fatal"
    assert refused["error"]["reason"] == "not_permitted"
    assert "does not grant reserve_stock" in refused["feedback"]
    assert refused["policy"] == {"version": version.number, "rules": ["not granted"]}
    assert not shop.requests("/inventory/reservations")


def test_a_refuse_rule_on_the_args(api: APIClient, run: Any, shop: Shop) -> None:
    apply_policy(
        """
        [[rule]]
        name = "big orders"
        agents = ["*"]
        tools = ["create_order"]
        when = 'context.args.amount.greaterThan(decimal("1000.00"))'
        action = "refuse"
        """
    )
    data = call(api, 0, "create_order", sku="A12", qty=1, amount="5000.00")
    assert data["status"] == "failed"
    assert data["error"]["reason"] == "not_permitted"
    assert "big orders" in data["feedback"]
    assert data["policy"]["rules"] == ["big orders"]


def test_rules_together_refuse_wins_then_two_then_one(api: APIClient, run: Any) -> None:
    apply_policy(
        """
        [[rule]]
        name = "one"
        agents = ["*"]
        tools = ["charge"]
        when = 'context.args.amount.greaterThan(decimal("100.00"))'
        action = "approve"
        [[rule]]
        name = "two"
        agents = ["*"]
        tools = ["charge"]
        when = 'context.args.amount.greaterThan(decimal("1000.00"))'
        action = "approve_by_two"
        [[rule]]
        name = "never"
        agents = ["*"]
        tools = ["charge"]
        when = 'context.args.amount.greaterThan(decimal("9000.00"))'
        action = "refuse"
        [[rule]]
        name = "small"
        agents = ["*"]
        tools = ["charge"]
        when = 'context.args.amount.lessThan(decimal("10.00"))'
        action = "no_approval"
        """
    )
    small = call(api, 0, "charge", order_id="o-1", amount="5.00")
    assert small["status"] == "succeeded", small
    assert small["policy"]["rules"] == ["small"]
    one = call(api, 1, "charge", order_id="o-2", amount="500.00")
    assert one["status"] == "pending_approval"
    assert one["approval"]["reason"] == "policy" and one["approval"]["rule"] == "one"
    two = call(api, 2, "charge", order_id="o-3", amount="5000.00")
    assert two["approval"]["rule"] == "two"
    assert ToolCall.objects.get(call_id=two["call_id"]).approval.approvals_required == 2
    never = call(api, 3, "charge", order_id="o-4", amount="9500.00")
    assert never["status"] == "failed" and never["error"]["reason"] == "not_permitted"


def test_log_only_records_without_applying(api: APIClient, run: Any) -> None:
    apply_policy(
        """
        [[rule]]
        name = "watch"
        agents = ["*"]
        tools = ["reserve_stock"]
        when = 'context.args.qty > 0'
        action = "refuse"
        mode = "log_only"
        """
    )
    data = call(api, 0, "reserve_stock", sku="A12", qty=1)
    assert data["status"] == "succeeded"
    assert data["policy"]["rules"] == ["would_refuse: watch"]


def test_a_count_limit_refuses_past_max_and_a_failed_call_frees(
    api: APIClient, run: Any, shop: Shop
) -> None:
    apply_policy(
        """
        [[limit]]
        name = "reservations per day"
        agents = ["*"]
        tools = ["reserve_stock"]
        max = 2
        per = "day"
        """
    )
    assert call(api, 0, "reserve_stock", sku="A12", qty=1)["status"] == "succeeded"
    assert call(api, 1, "reserve_stock", sku="A12", qty=1)["status"] == "succeeded"
    over = call(api, 2, "reserve_stock", sku="A12", qty=1)
    assert over["status"] == "failed" and over["error"]["reason"] == "spend_limit", over
    assert "2 calls" in over["feedback"] and "resets at 00:00 UTC" in over["feedback"]
    assert SpendCounter.objects.get().spent == 2


def test_a_sum_limit_per_currency(api: APIClient, run: Any) -> None:
    apply_policy(
        """
        [[limit]]
        name = "charges per day"
        agents = ["*"]
        tools = ["charge"]
        sum = "amount"
        max = "500.00"
        per = "day"
        [[rule]]
        name = "all charges"
        agents = ["*"]
        tools = ["charge"]
        when = 'true'
        action = "no_approval"
        """
    )
    first = call(api, 0, "charge", order_id="o-1", amount="480.00", currency="EUR")
    assert first["status"] == "succeeded", first
    over = call(api, 1, "charge", order_id="o-2", amount="30.00", currency="EUR")
    assert over["error"]["reason"] == "spend_limit"
    assert "500.00 EUR" in over["feedback"] and "480.00 spent" in over["feedback"], over["feedback"]
    usd = call(api, 2, "charge", order_id="o-3", amount="30.00", currency="USD")
    assert usd["status"] == "succeeded"


def test_check_warns_when_the_policy_in_force_no_longer_validates(
    shop: Shop, settings: Any, agent_a: Any
) -> None:
    from django.core import checks

    from toolops.accounts.models import Agent

    apply_policy(
        """
        [[grant]]
        agents = ["agent-a"]
        tools = ["query_stock"]
        """
    )
    assert not [m for m in checks.run_checks(databases=["default"]) if m.id == "toolops.W012"]
    Agent.objects.filter(name="agent-a").update(name="agent-renamed")
    warned = [m for m in checks.run_checks(databases=["default"]) if m.id == "toolops.W012"]
    assert len(warned) == 1 and "no agent is named 'agent-a'" in warned[0].msg


def test_a_held_call_reserves_and_one_past_the_limit_is_refused_without_an_approval(
    api: APIClient, run: Any
) -> None:
    from toolops.models import Approval

    apply_policy(
        """
        [[limit]]
        name = "charges per day"
        agents = ["*"]
        tools = ["charge"]
        sum = "amount"
        max = "100.00"
        per = "day"
        """
    )
    held = call(api, 0, "charge", order_id="o-1", amount="80.00")
    assert held["status"] == "pending_approval"
    assert held["approval"]["reason"] == "irreversible" and held["approval"]["rule"] is None
    over = call(api, 1, "charge", order_id="o-2", amount="30.00")
    assert over["status"] == "failed" and over["error"]["reason"] == "spend_limit"
    assert over["approval"] is None
    assert "(80.00 spent)" in over["feedback"]
    assert Approval.objects.count() == 1


def test_past_an_approve_limit_the_call_waits_and_says_why(api: APIClient, run: Any) -> None:
    apply_policy(
        """
        [[limit]]
        name = "reservations"
        agents = ["agent-a"]
        tools = ["reserve_stock"]
        max = 1
        per = "total"
        on_exceed = "approve"
        """
    )
    assert call(api, 0, "reserve_stock", sku="A12", qty=1)["status"] == "succeeded"
    held = call(api, 1, "reserve_stock", sku="A12", qty=1)
    assert held["status"] == "pending_approval"
    assert held["approval"]["rule"] == "reservations"
    assert held["policy"]["rules"] == ["reservations"]
    assert "it never resets" in held["feedback"] and "waits for a reviewer" in held["feedback"]
    # Reserved past the max, by the reviewer's leave if they approve.
    assert SpendCounter.objects.get().spent == 2
