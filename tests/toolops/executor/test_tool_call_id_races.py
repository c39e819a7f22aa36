"""Two requests with one tool_call_id racing: both read the run before either wrote, so
the loser's call row meets the winner's on the run's unique tool_call_id — inside an
approval hold, in the claim's statement, in a read's record, and in the record of a call
refused before anything was sent. Each answers as API.md says for a reused tool_call_id
(a conflict when the args differ, the recorded call when they agree), never a server
error, and leaves one call."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from tests.conftest import Shop
from tests.toolops.api.helpers import create_run
from toolops import executor
from toolops.models import Agent, Approval, ToolCall

pytestmark = pytest.mark.django_db


def raced(agent: Agent, args: list[Any], tool: str = "charge") -> list[Any]:
    """Each request prepared and its run read first, then submitted in turn: the second
    submits with a context read before the first wrote anything."""
    requests = [
        executor.CallRequest(step_index=0, tool=tool, args=a, tool_call_id="tc-same") for a in args
    ]
    prepared = [executor.prepare(r, agent_id=agent.pk, run_id="r-1") for r in requests]
    contexts = [
        executor.read_context(agent=agent, run_id="r-1", request=r, prepared=p)
        for r, p in zip(requests, prepared, strict=True)
    ]
    answers = []
    for context, request, ready in zip(contexts, requests, prepared, strict=True):
        try:
            answers.append(executor.submit(context, request, ready))
        except executor.ToolCallConflict as conflict:
            answers.append(conflict)
    return answers


def test_the_loser_with_other_args_gets_a_conflict(
    api: APIClient, agent_a: tuple[Agent, str], shop: Shop
) -> None:
    create_run(api, "r-1")
    first, second = raced(
        agent_a[0], [{"order_id": "o-1", "amount": "10.00"}, {"order_id": "o-1", "amount": "99.00"}]
    )

    assert first.call.status == "pending_approval"
    assert isinstance(second, executor.ToolCallConflict)
    assert ToolCall.objects.filter(tool_call_id="tc-same").count() == 1
    assert Approval.objects.count() == 1


def test_the_loser_with_the_same_args_gets_the_held_call(
    api: APIClient, agent_a: tuple[Agent, str], shop: Shop
) -> None:
    create_run(api, "r-1")
    # Same args, and so the same key: the loser's claim is lost before any insert.
    args = {"order_id": "o-1", "amount": "10.00"}
    first, second = raced(agent_a[0], [args, dict(args)])

    assert first.call.status == "pending_approval"
    assert second.call.call_id == first.call.call_id and second.replayed
    assert Approval.objects.count() == 1
    assert not shop.requests("/payments/charges")


def test_a_write_whose_claim_meets_the_winners_call_gets_a_conflict(
    api: APIClient, agent_a: tuple[Agent, str], shop: Shop
) -> None:
    create_run(api, "r-1")
    first, second = raced(
        agent_a[0], [{"sku": "A12", "qty": 1}, {"sku": "A12", "qty": 2}], tool="reserve_stock"
    )

    assert first.call.status == "succeeded"
    assert isinstance(second, executor.ToolCallConflict)
    assert ToolCall.objects.filter(tool_call_id="tc-same").count() == 1
    assert len(shop.requests("/inventory/reservations")) == 1


def test_a_read_recorded_after_the_winners_gets_a_conflict(
    api: APIClient, agent_a: tuple[Agent, str], shop: Shop
) -> None:
    create_run(api, "r-1")
    first, second = raced(agent_a[0], [{"sku": "A12"}, {"sku": "B7"}], tool="query_stock")

    assert first.call.status == "succeeded"
    assert isinstance(second, executor.ToolCallConflict)
    assert ToolCall.objects.filter(tool_call_id="tc-same").count() == 1


@pytest.mark.parametrize("same", [True, False], ids=["same-args", "other-args"])
def test_a_refused_call_recorded_after_the_winners(
    api: APIClient, agent_a: tuple[Agent, str], shop: Shop, same: bool
) -> None:
    create_run(api, "r-1")
    # Invalid args: each call ends before anything is claimed or sent.
    args = [{"sku": 7}, {"sku": 7} if same else {"sku": 8}]
    first, second = raced(agent_a[0], args, tool="query_stock")

    assert first.call.error_reason == "invalid_args"
    if same:
        assert second.replayed and second.call.call_id == first.call.call_id
    else:
        assert isinstance(second, executor.ToolCallConflict)
    assert ToolCall.objects.filter(tool_call_id="tc-same").count() == 1
