"""Abusing approvals: an agent that got a charge approved tries to slip other args under
that approval; a reviewer submits the decision twice, or decides what expired or what an
aborted run left; a reviewer approves the calls of their own agent (separation of
duties: the person who runs an agent may stop its calls, never wave them through)."""

# The console's personas are imported as fixtures, so test arguments shadow them.
# ruff: noqa: F811

from __future__ import annotations

from datetime import timedelta
from io import StringIO
from typing import Any
from unittest.mock import patch

import pytest
from django.contrib.messages import get_messages
from django.core.management import CommandError, call_command
from django.utils import timezone
from rest_framework.test import APIClient

from tests.conftest import Shop
from tests.security.conftest import logged_in, make_run, reviewer, support  # noqa: F401
from tests.toolops.api.helpers import body, create_run, post_call
from toolops.approvals.models import Approval, ApprovalVote
from toolops.approvals.services import DecisionRefused, approval_decide
from toolops.models import Agent, ToolCall
from toolops.tasks import execute_approved_call

pytestmark = pytest.mark.django_db

CHARGE = {"order_id": "ord-9", "amount": "199.00"}
BIGGER = {"order_id": "ord-9", "amount": "99999.00"}


def charge(api: APIClient, args: dict[str, Any], tool_call_id: str) -> Any:
    return post_call(api, step_index=3, tool="charge", args=args, tool_call_id=tool_call_id)


def approve(approval: Approval, by: Any, *, args_hash: str | None = None) -> Approval:
    with patch("toolops.tasks.execute_approved_call.delay", autospec=True):
        return approval_decide(
            approval=approval,
            by=by,
            approve=True,
            note="",
            args_hash=approval.args_hash if args_hash is None else args_hash,
        )


def test_the_same_tool_call_id_with_changed_args_is_refused_not_run_under_the_approval(
    api: APIClient, shop: Shop, reviewer: Any
) -> None:
    create_run(api)
    held = charge(api, CHARGE, "tc-pay")
    assert held.status_code == 202

    swapped = charge(api, BIGGER, "tc-pay")

    assert swapped.status_code == 409
    approval = Approval.objects.get()
    approve(approval, reviewer)
    assert execute_approved_call(approval.pk) == "succeeded"
    assert [r["body"]["amount"] for r in shop.requests("/payments/charges")] == ["199.00"]


def test_a_new_call_with_other_args_waits_for_its_own_approval(
    api: APIClient, shop: Shop, reviewer: Any
) -> None:
    create_run(api)
    first = body(charge(api, CHARGE, "tc-pay"))
    approve(Approval.objects.get(approval_id=first["approval"]["approval_id"]), reviewer)

    second = charge(api, BIGGER, "tc-pay-2")

    assert second.status_code == 202
    assert body(second)["status"] == "pending_approval"
    assert body(second)["approval"]["approval_id"] != first["approval"]["approval_id"]
    assert body(second)["approval"]["status"] == "pending"
    assert shop.requests("/payments/charges") == []


def test_a_decision_on_args_other_than_those_shown_is_refused(
    api: APIClient, shop: Shop, reviewer: Any
) -> None:
    create_run(api)
    charge(api, CHARGE, "tc-pay")
    approval = Approval.objects.get()

    with pytest.raises(DecisionRefused, match="not the ones you were shown"):
        approve(approval, reviewer, args_hash="0" * 64)

    assert Approval.objects.get().status == "pending" and not ApprovalVote.objects.exists()


def test_posting_the_decide_form_twice_makes_one_decision_and_one_execution(
    api: APIClient, shop: Shop, reviewer: Any, django_capture_on_commit_callbacks: Any
) -> None:
    create_run(api)
    charge(api, CHARGE, "tc-pay")
    approval = Approval.objects.get()
    browser = logged_in(reviewer)
    form = {"decision": "approve", "note": "", "args_hash": approval.args_hash, "confirmed": "1"}
    url = f"/console/approvals/{approval.approval_id}/decide/"

    with (
        patch("toolops.tasks.execute_approved_call.delay", autospec=True) as delay,
        django_capture_on_commit_callbacks(execute=True),
    ):
        browser.post(url, form)
        again = browser.post(url, form, follow=True)

    delay.assert_called_once_with(approval.pk)
    assert ApprovalVote.objects.count() == 1
    said = [str(m) for m in get_messages(again.wsgi_request)]
    assert any("Already decided: approved by rita" in m for m in said), said


def test_deciding_an_expired_approval_is_refused_and_runs_nothing(
    api: APIClient, shop: Shop, reviewer: Any
) -> None:
    create_run(api)
    call = body(charge(api, CHARGE, "tc-pay"))
    Approval.objects.update(expires_at=timezone.now() - timedelta(seconds=1))

    with pytest.raises(DecisionRefused, match="expired"):
        approve(Approval.objects.get(), reviewer)

    assert Approval.objects.get().status == "expired"
    assert ToolCall.objects.get(call_id=call["call_id"]).status == "rejected"
    assert shop.requests() == []


def test_approving_a_call_of_an_aborted_run_is_refused_and_runs_nothing(
    api: APIClient, shop: Shop, reviewer: Any
) -> None:
    create_run(api)
    charge(api, CHARGE, "tc-pay")
    assert api.post("/api/v1/runs/r-1/abort", {"reason": "stop"}, format="json").status_code in (
        200,
        202,
    )

    with pytest.raises(DecisionRefused, match="Already decided: rejected"):
        approve(Approval.objects.get(), reviewer)

    assert shop.requests("/payments/charges") == []


def test_an_approval_taken_before_the_abort_is_not_run_after_it(
    api: APIClient, shop: Shop, reviewer: Any
) -> None:
    create_run(api)
    charge(api, CHARGE, "tc-pay")
    approval = approve(Approval.objects.get(), reviewer)

    api.post("/api/v1/runs/r-1/abort", {"reason": "stop"}, format="json")

    assert execute_approved_call(approval.pk) == "skipped"
    assert shop.requests("/payments/charges") == []


# -- separation of duties -------------------------------------------------------------------


@pytest.fixture
def own_agent(agent_a: tuple[Agent, str], reviewer: Any) -> Agent:
    agent = agent_a[0]
    agent.owner = reviewer
    agent.save(update_fields=["owner"])
    return agent


def test_a_reviewer_cannot_approve_a_call_made_by_their_own_agent(
    own_agent: Agent, api: APIClient, shop: Shop, reviewer: Any
) -> None:
    create_run(api)
    charge(api, CHARGE, "tc-pay")
    approval = Approval.objects.get()

    with pytest.raises(DecisionRefused, match="You cannot approve calls made by your own agent"):
        approve(approval, reviewer)

    assert Approval.objects.get().status == "pending" and not ApprovalVote.objects.exists()


def test_the_page_says_so_before_and_after_the_reviewer_tries(
    own_agent: Agent, api: APIClient, shop: Shop, reviewer: Any
) -> None:
    create_run(api)
    charge(api, CHARGE, "tc-pay")
    approval = Approval.objects.get()
    browser = logged_in(reviewer)

    page = browser.get(f"/console/approvals/{approval.approval_id}/").content.decode()
    assert "made by your own agent, agent-a: you cannot approve it" in page
    answer = browser.post(
        f"/console/approvals/{approval.approval_id}/decide/",
        {"decision": "approve", "note": "", "args_hash": approval.args_hash},
        follow=True,
    )

    assert "You cannot approve calls made by your own agent" in answer.content.decode()
    assert Approval.objects.get().status == "pending"


def test_a_reviewer_may_still_reject_their_own_agents_call(
    own_agent: Agent, api: APIClient, shop: Shop, reviewer: Any
) -> None:
    create_run(api)
    charge(api, CHARGE, "tc-pay")
    approval = Approval.objects.get()

    approval_decide(
        approval=approval, by=reviewer, approve=False, note="not now", args_hash=approval.args_hash
    )

    assert Approval.objects.get().status == "rejected"


def test_another_reviewer_approves_the_owners_agents_call(
    own_agent: Agent, api: APIClient, shop: Shop, django_user_model: Any
) -> None:
    from tests.console.conftest import make_user

    raj = make_user(django_user_model, "raj", "reviewers")
    create_run(api)
    charge(api, CHARGE, "tc-pay")

    assert approve(Approval.objects.get(), raj).status == "approved"


def test_a_superuser_who_owns_the_agent_cannot_approve_its_call_either(
    agent_a: tuple[Agent, str], api: APIClient, shop: Shop, django_user_model: Any
) -> None:
    boss = django_user_model.objects.create_superuser("boss", "boss@example.com", "pw")
    Agent.objects.filter(pk=agent_a[0].pk).update(owner=boss)
    create_run(api)
    charge(api, CHARGE, "tc-pay")

    with pytest.raises(DecisionRefused, match="your own agent"):
        approve(Approval.objects.get(), boss)


def test_create_agent_names_its_owner(reviewer: Any) -> None:
    call_command("create_agent", "bot", "--owner", reviewer.username, stdout=StringIO())

    assert Agent.objects.get(name="bot").owner == reviewer


def test_create_agent_refuses_an_owner_who_does_not_exist() -> None:
    with pytest.raises(CommandError, match="no user named 'nobody'"):
        call_command("create_agent", "bot", "--owner", "nobody", stdout=StringIO())

    assert not Agent.objects.filter(name="bot").exists()


def test_an_agent_without_an_owner_is_decided_as_before(
    agent_a: tuple[Agent, str], reviewer: Any
) -> None:
    from tests.security.conftest import hold

    approval = hold(make_run(agent_a[0], "r-x"), "tc-x")

    assert approve(approval, reviewer).status == "approved"
