"""Rules on calls (API.md "Agent policy"), through the API against the demo shop: two
reviewers where a rule asks for two, `no_approval` and what still waits, the agent's age,
args Cedar cannot hold, integers, a rule on every tool, and a rollback."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from tests.conftest import Shop
from tests.toolops.api.helpers import create_run
from tests.toolops.policy.flow import CHARGES_RUN, call, decide, reviewer
from tests.toolops.policy.helpers import apply_policy
from toolops.approvals.services import DecisionRefused
from toolops.models import Agent, Approval, ToolCall
from toolops.policy import versions
from toolops.tasks import execute_approved_call

pytestmark = pytest.mark.django_db


@pytest.fixture
def run(api: APIClient, shop: Shop) -> dict[str, Any]:
    return create_run(api, "r-1")


def rule(name: str, tools: str, when: str, action: str) -> str:
    return f"""
        [[rule]]
        name = "{name}"
        agents = ["*"]
        tools = [{tools}]
        when = '{when}'
        action = "{action}"
        """


def test_it_needs_two_different_reviewers_for_approve_by_two(
    api: APIClient, run: Any, shop: Shop
) -> None:
    rita, raj = reviewer("rita"), reviewer("raj")
    apply_policy(rule("big charges", '"charge"', "true", "approve_by_two"))
    held = call(api, 0, "charge", order_id="o-1", amount="500.00")
    assert held["approval"]["rule"] == "big charges"
    approval = Approval.objects.get()
    assert approval.approvals_required == 2

    decide(held["call_id"], rita, approve=True)
    with pytest.raises(DecisionRefused, match="needs another reviewer"):
        decide(held["call_id"], rita, approve=True)

    approval.refresh_from_db()
    assert approval.status == "pending"
    assert ToolCall.objects.get(call_id=held["call_id"]).status == "pending_approval"
    decide(held["call_id"], raj, approve=True)
    approval.refresh_from_db()
    assert approval.status == "approved" and approval.decided_by == raj
    assert shop.requests("/payments/charges") == []
    assert execute_approved_call(approval.pk) == "succeeded"
    assert len(shop.requests("/payments/charges")) == 1


def test_it_lifts_the_catalog_approval_only_when_no_other_rule_asks_for_one(
    api: APIClient, run: Any, shop: Shop
) -> None:
    apply_policy(
        CHARGES_RUN
        + rule(
            "large charges",
            '"charge"',
            'context.args.amount.greaterThan(decimal("100.00"))',
            "approve",
        )
        + rule("watch charges", '"charge"', "true", "approve").replace(
            'action = "approve"', 'action = "approve"\nmode = "log_only"'
        )
    )
    small = call(api, 0, "charge", order_id="o-1", amount="20.00")
    # A log_only rule asks for nothing: the approval is still lifted.
    assert small["status"] == "succeeded", small
    assert small["policy"]["rules"] == ["charges run", "would_approve: watch charges"]

    large = call(api, 1, "charge", order_id="o-2", amount="200.00")

    assert large["status"] == "pending_approval", large
    assert large["approval"]["reason"] == "policy"
    assert large["approval"]["rule"] == "large charges"
    assert set(large["policy"]["rules"]) >= {"charges run", "large charges"}
    assert len(shop.requests("/payments/charges")) == 1


def test_it_still_holds_a_session_duplicate_under_no_approval(api: APIClient, shop: Shop) -> None:
    apply_policy(CHARGES_RUN)
    create_run(api, "r-1", session_key="conv-7")
    create_run(api, "r-2", session_key="conv-7")
    first = call(api, 0, "charge", "r-1", order_id="o-1", amount="20.00")
    assert first["status"] == "succeeded", first

    again = call(api, 0, "charge", "r-2", order_id="o-1", amount="20.00")

    assert again["status"] == "pending_approval", again
    assert again["approval"]["reason"] == "possible_duplicate"
    assert again["approval"]["duplicate_of"] == first["call_id"]
    assert len(shop.requests("/payments/charges")) == 1


def test_a_session_duplicate_keeps_the_two_reviewers_a_rule_asks_for(
    api: APIClient, shop: Shop
) -> None:
    apply_policy(
        rule(
            "huge",
            '"charge"',
            'context.args.amount.greaterThan(decimal("1000.00"))',
            "approve_by_two",
        )
    )
    create_run(api, "r-1", session_key="conv-8")
    create_run(api, "r-2", session_key="conv-8")
    first = call(api, 0, "charge", "r-1", order_id="o-1", amount="2500.00")
    again = call(api, 0, "charge", "r-2", order_id="o-1", amount="2500.00")

    assert first["approval"]["rule"] == "huge"
    assert again["approval"]["reason"] == "possible_duplicate"
    assert again["approval"]["rule"] == "huge"
    assert (
        Approval.objects.get(approval_id=again["approval"]["approval_id"]).approvals_required == 2
    )


def test_it_holds_calls_of_an_agent_younger_than_a_week(api: APIClient, run: Any) -> None:
    apply_policy(rule("new agents", '"reserve_stock"', "principal.age_days < 7", "approve"))

    young = call(api, 0, "reserve_stock", sku="A12", qty=1)

    assert young["status"] == "pending_approval", young
    assert young["approval"]["rule"] == "new agents"
    agent = Agent.objects.get(name="agent-a")
    agent.created_at = timezone.now() - timedelta(days=10)
    agent.save(update_fields=["created_at"])  # saved: the API forgets its cached agent
    older = call(api, 1, "reserve_stock", sku="A12", qty=1)
    assert older["status"] == "succeeded", older
    assert older["policy"]["rules"] == []


def test_it_fails_closed_on_a_decimal_cedar_cannot_hold(
    api: APIClient, run: Any, shop: Shop
) -> None:
    apply_policy(
        rule(
            "big orders",
            '"create_order"',
            'context.args.amount.greaterThan(decimal("100.00"))',
            "refuse",
        )
        + rule(
            "small charges",
            '"charge"',
            'context.args.amount.lessThan(decimal("50.00"))',
            "no_approval",
        )
    )
    # Six digits after the point: more than Cedar's decimal keeps. Small, yet refused.
    order = call(api, 0, "create_order", sku="A12", qty=1, amount="1.123456")
    assert order["status"] == "failed", order
    assert order["error"]["reason"] == "not_permitted"
    assert order["policy"]["rules"] == ["big orders"]
    # And nothing is lifted: the catalog's approval stands.
    charge = call(api, 1, "charge", order_id="o-1", amount="1.123456")
    assert charge["status"] == "pending_approval", charge
    assert charge["approval"]["reason"] == "irreversible"
    # Four digits is what Cedar keeps: decided on its value.
    exact = call(api, 2, "charge", order_id="o-2", amount="1.1234")
    assert exact["status"] == "succeeded", exact
    assert shop.requests("/orders") == []


def test_it_reads_integer_args_as_longs(api: APIClient, run: Any, shop: Shop) -> None:
    apply_policy(rule("bulk", '"reserve_stock"', "context.args.qty > 5", "refuse"))

    bulk = call(api, 0, "reserve_stock", sku="A12", qty=10)

    assert bulk["error"]["reason"] == "not_permitted", bulk
    assert call(api, 1, "reserve_stock", sku="A12", qty=5)["status"] == "succeeded"
    assert len(shop.requests("/inventory/reservations")) == 1


def test_it_applies_a_rule_on_every_tool_that_tests_for_a_field(
    api: APIClient, run: Any, shop: Shop
) -> None:
    apply_policy(rule("anything with an amount", '"*"', "context.args has amount", "refuse"))

    order = call(api, 0, "create_order", sku="A12", qty=1, amount="5.00")

    assert order["error"]["reason"] == "not_permitted", order
    assert order["policy"]["rules"] == ["anything with an amount"]
    reserved = call(api, 1, "reserve_stock", sku="A12", qty=1)
    assert reserved["status"] == "succeeded" and reserved["policy"]["rules"] == []
    assert call(api, 2, "query_stock", sku="A12")["status"] == "succeeded"
    assert shop.requests("/orders") == []


def test_it_restores_the_old_behaviour_on_rollback(api: APIClient, run: Any) -> None:
    first = apply_policy(rule("bulk", '"reserve_stock"', "context.args.qty > 5", "refuse"))
    apply_policy('default = "allow"')
    assert call(api, 0, "reserve_stock", sku="A12", qty=10)["status"] == "succeeded"

    restored = versions.rollback(first.number, note="bulk again", actor_name="test")

    refused = call(api, 1, "reserve_stock", sku="A12", qty=10)
    assert refused["error"]["reason"] == "not_permitted", refused
    assert refused["policy"] == {"version": restored.number, "rules": ["bulk"]}
    assert restored.restores == first.number


def test_it_fails_closed_when_a_rules_condition_errors(api: APIClient, run: Any) -> None:
    # qty * 2**62 overflows Cedar's Long from qty = 2 on: the condition cannot be decided.
    apply_policy(
        rule("huge", '"reserve_stock"', "context.args.qty * 4611686018427387904 > 0", "refuse")
    )

    assert call(api, 0, "reserve_stock", sku="A12", qty=1)["error"]["reason"] == "not_permitted"
    errs = call(api, 1, "reserve_stock", sku="A12", qty=2)

    assert errs["status"] == "failed" and errs["error"]["reason"] == "not_permitted", errs
