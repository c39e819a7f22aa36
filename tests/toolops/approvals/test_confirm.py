"""Approving on purpose, on the server (no browser, no JavaScript): an approve POST for an
irreversible tool without `confirmed` decides nothing and answers a confirmation page; an
approve POST that carries a reason typed to reject asks which was meant; refusals change
nothing and give the texts typed back; bad input is refused with a clear message."""

# ruff: noqa: F811

from __future__ import annotations

from typing import Any
from unittest.mock import patch

import pytest
from django.test import Client

from tests.console.conftest import (  # noqa: F401 - fixtures shared with the console tests
    fast_password_hashing,
    logged_in,
    make_run,
    reviewer,
    superuser,
)
from tests.console.facts_catalog import CHARGE, facts_catalog  # noqa: F401
from toolops.approvals.models import Approval, ApprovalVote
from toolops.models import Agent, AuditEntry, ToolCall

from .test_console import hold, said, url

pytestmark = pytest.mark.django_db

ORDER = {"sku": "A12", "qty": 1}


@pytest.fixture
def charge(agent_a: tuple[Agent, str], facts_catalog: Any) -> Approval:
    return hold(make_run(agent_a[0], "r-charge"), "tc-1", "charge", CHARGE)


@pytest.fixture
def executed() -> Any:
    with patch("toolops.tasks.execute_approved_call.delay", autospec=True) as delay:
        yield delay


def post(client: Client, approval: Approval, **data: Any) -> Any:
    return client.post(url(approval, "decide/"), {"args_hash": approval.args_hash, **data})


def nothing_decided(approval: Approval) -> None:
    approval.refresh_from_db()
    assert approval.status == Approval.Status.PENDING
    assert not ApprovalVote.objects.filter(approval=approval).exists()
    assert not AuditEntry.objects.filter(action="approval.decide").exists()
    assert ToolCall.objects.get(approval=approval).status == "pending_approval"


def test_an_approve_without_confirmed_decides_nothing_and_asks(
    reviewer: Any, charge: Approval, executed: Any
) -> None:
    response = post(logged_in(reviewer), charge, decision="approve", note="ok by phone")

    assert response.status_code == 200
    nothing_decided(charge)
    executed.assert_not_called()
    page = response.content.decode()
    assert "Charge 89.00 EUR to customer cus_42 for order ord_1?" in page
    assert "<dt>Customer</dt><dd>cus_42</dd>" in page
    assert "Only refund can undo charge: ToolOps runs it if the run is abandoned." in page
    # Works without JavaScript: Cancel first and focused, then the confirm button.
    cancel = f'<a class="button" href="{url(charge)}" autofocus>Cancel</a>'
    confirm = 'value="approve" class="primary approve">Approve: charge 89.00 EUR</button>'
    assert cancel in page and confirm in page and page.index(cancel) < page.index(confirm)
    assert '<input type="hidden" name="confirmed" value="1">' in page
    assert '<input type="hidden" name="note" value="ok by phone">' in page
    assert "<script" not in page.split("<main")[1]  # nothing inline (CSP)


def test_the_confirmed_approval_goes_through(
    reviewer: Any, charge: Approval, executed: Any
) -> None:
    response = post(
        logged_in(reviewer), charge, decision="approve", note="ok by phone", confirmed="1"
    )

    assert response.status_code == 302
    charge.refresh_from_db()
    assert (charge.status, charge.note, charge.decided_by) == ("approved", "ok by phone", reviewer)
    assert ToolCall.objects.get(approval=charge).status == "in_progress"


def test_a_tool_that_can_be_taken_back_approves_without_the_extra_step(
    reviewer: Any, agent_a: tuple[Agent, str], facts_catalog: Any, executed: Any
) -> None:
    order = hold(make_run(agent_a[0], "r-order"), "tc-1", "create_order", ORDER, reason="policy")

    response = post(logged_in(reviewer), order, decision="approve")

    assert response.status_code == 302
    order.refresh_from_db()
    assert order.status == "approved"


def test_a_tool_gone_from_the_catalog_is_confirmed_too(
    reviewer: Any, agent_a: tuple[Agent, str], facts_catalog: Any
) -> None:
    gone = hold(make_run(agent_a[0], "r-gone"), "tc-1", "retired_tool", {"x": 1})

    response = post(logged_in(reviewer), gone, decision="approve")

    assert response.status_code == 200 and "Approve: retired_tool" in response.content.decode()
    nothing_decided(gone)


def test_an_approve_with_a_reason_to_reject_asks_which_was_meant(
    reviewer: Any, charge: Approval
) -> None:
    client = logged_in(reviewer)

    response = post(
        client, charge, decision="approve", confirmed="1", note="fine", reject_reason="wrong sum"
    )

    assert response.status_code == 200
    nothing_decided(charge)
    page = response.content.decode()
    assert 'You typed a reason to reject: “<span class="typed-reason">wrong sum</span>”' in page
    assert ">Reject with this reason</button>" in page
    assert ">Approve anyway (the reason is discarded)</button>" in page
    assert f'<a class="button" href="{url(charge)}" autofocus>Cancel</a>' in page
    # Both texts are kept: in the choices, and for the page Cancel goes back to.
    assert '<input type="hidden" name="reject_reason" value="wrong sum">' in page
    assert '<input type="hidden" name="note" value="fine">' in page
    back = client.get(url(charge)).content.decode()
    assert 'id="approve-note" rows="2" maxlength="4000">fine</textarea>' in back
    assert 'id="approval-note" rows="2" maxlength="4000">wrong sum</textarea>' in back


def test_reject_with_this_reason(reviewer: Any, charge: Approval, executed: Any) -> None:
    response = post(logged_in(reviewer), charge, decision="reject", reject_reason="wrong sum")

    assert response.status_code == 302
    charge.refresh_from_db()
    assert (charge.status, charge.note) == ("rejected", "wrong sum")
    executed.assert_not_called()


def test_approve_anyway_discards_the_reason_and_still_confirms(
    reviewer: Any, charge: Approval, executed: Any
) -> None:
    client = logged_in(reviewer)

    asked = post(client, charge, decision="approve", note="fine", discard_reason="1")
    assert asked.status_code == 200 and "Approve: charge 89.00 EUR" in asked.content.decode()
    nothing_decided(charge)
    chosen = {"note": "fine", "discard_reason": "1", "reject_reason": "wrong sum"}
    done = post(client, charge, decision="approve", confirmed="1", **chosen)

    assert done.status_code == 302
    charge.refresh_from_db()
    assert (charge.status, charge.note) == ("approved", "fine")
    assert "wrong sum" not in str(AuditEntry.objects.get(action="approval.decide").detail)


def test_a_single_note_still_rejects_for_clients_that_send_one(
    reviewer: Any, charge: Approval
) -> None:
    post(logged_in(reviewer), charge, decision="reject", note="Wrong customer.")

    charge.refresh_from_db()
    assert (charge.status, charge.note) == ("rejected", "Wrong customer.")


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        ({"decision": "maybe"}, "Nothing was decided: Choose Approve or Reject."),
        ({"decision": "approve", "args_hash": "stale"}, "not the ones you were shown"),
        ({"decision": "approve", "args_hash": ""}, "The page was incomplete: reload it"),
        ({"decision": "reject", "reject_reason": "  "}, "A note is required to reject"),
        ({"decision": "reject", "reject_reason": "x" * 4001}, "Why reject: Ensure this value"),
        ({"decision": "approve", "note": "y" * 4001}, "Note: Ensure this value has at most"),
    ],
)
def test_bad_input_is_refused_with_a_clear_message_and_nothing_decided(
    reviewer: Any, charge: Approval, data: dict[str, str], problem: str
) -> None:
    client = logged_in(reviewer)
    data = {"note": "my note", **data}

    response = post(client, charge, **data)

    # Refused, not asked: a confirmation of what cannot be decided would only delay that.
    assert response.status_code == 302 and response["Location"] == url(charge)
    assert problem in said(response)[0]
    nothing_decided(charge)
    # What was typed comes back on the page.
    page = client.get(url(charge)).content.decode()
    assert f">{data['note'][:4000]}</textarea>" in page


def test_a_decided_approval_is_refused_not_confirmed(
    reviewer: Any, superuser: Any, charge: Approval, executed: Any
) -> None:
    post(logged_in(superuser), charge, decision="reject", reject_reason="no")

    response = post(logged_in(reviewer), charge, decision="approve")

    assert response.status_code == 302
    assert said(response)[0].startswith("Already decided: rejected by admin")
    assert ApprovalVote.objects.filter(approval=charge).count() == 1


def test_ones_own_agent_is_refused_not_confirmed(
    reviewer: Any, agent_a: tuple[Agent, str], charge: Approval
) -> None:
    Agent.objects.filter(pk=agent_a[0].pk).update(owner=reviewer)

    response = post(logged_in(reviewer), charge, decision="approve")

    assert response.status_code == 302
    assert "You cannot approve calls made by your own agent" in said(response)[0]
    nothing_decided(charge)
