"""After a decision: on to the next approval waiting for this reviewer, with "next: 1 of 2
waiting" counted as they see the queue, and that approval's header marking what differs
from the one just decided; with none left, the queue, "Nothing else waits for you."."""

# ruff: noqa: F811

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from tests.console.conftest import (  # noqa: F401 - fixtures shared with the console tests
    fast_password_hashing,
    logged_in,
    make_run,
    reviewer,
)
from tests.console.facts_catalog import facts_catalog  # noqa: F401
from toolops.approvals.models import Approval, ApprovalVote
from toolops.models import Agent, Run

from .test_console import decide, hold, said, url

pytestmark = pytest.mark.django_db


def order(run: Run, n: int, qty: int = 1, **extra: Any) -> Approval:
    args = {"sku": "A12", "qty": qty}
    return hold(run, f"tc-{n}", "create_order", args, step_index=n, reason="policy", **extra)


@pytest.fixture
def run(agent_a: tuple[Agent, str], facts_catalog: Any) -> Run:
    return make_run(agent_a[0], "r-orders")


def test_the_banner_says_next_counted_as_this_reviewer_sees_the_queue(
    reviewer: Any, run: Run
) -> None:
    first = order(run, 1, age_s=500)
    following = order(run, 2, qty=2, age_s=400)
    order(run, 3, age_s=300)
    # Not waiting for rita: one she voted on already, one past its time.
    voted = order(run, 4, age_s=200, required=2)
    ApprovalVote.objects.create(
        approval=voted, reviewer=reviewer, decision="approve", args_hash=voted.args_hash
    )
    order(run, 5, age_s=2000, ttl_s=1000)

    response = decide(logged_in(reviewer), first, "approve")

    assert response["Location"] == f"{url(following)}?after={first.approval_id}"
    assert said(response) == [
        "Approved “Order 1 × A12” (tc-1 in run r-orders): the worker runs it now · next: "
        "1 of 2 waiting"
    ]


def test_the_next_page_marks_what_differs_from_the_one_just_decided(
    reviewer: Any, run: Run
) -> None:
    first, following = order(run, 1, age_s=60), order(run, 2, qty=2)
    decide(logged_in(reviewer), first, "approve")

    page = logged_in(reviewer).get(f"{url(following)}?after={first.approval_id}")

    html = page.content.decode()
    assert '<span class="action">Order <mark>2</mark> × A12</span>' in html
    assert '<div class="changed"><dt>Qty</dt><dd><mark>2</mark></dd></div>' in html
    assert "<div><dt>Sku</dt><dd>A12</dd></div>" in html  # the same: not marked
    said = "Not the one you just decided (“Order 1 × A12”): its <strong>qty</strong> differs"
    assert said in html
    # The live region refreshes itself with the same comparison.
    assert f'hx-get="{url(following)}?after={first.approval_id}"' in html
    fragment = logged_in(reviewer).get(
        f"{url(following)}?after={first.approval_id}", headers={"HX-Request": "true"}
    )
    assert "<mark>2</mark>" in fragment.content.decode()


def test_a_next_approval_asking_the_same_says_so(reviewer: Any, run: Run) -> None:
    first, following = order(run, 1, age_s=60), order(run, 2)

    html = logged_in(reviewer).get(f"{url(following)}?after={first.approval_id}").content.decode()

    assert "<mark>" not in html
    assert "Same title and facts as the one you just decided (“Order 1 × A12”)" in html


@pytest.mark.parametrize("after", ["ap-unknown", "self", ""])
def test_nothing_is_compared_without_a_known_other_approval(
    reviewer: Any, run: Run, after: str
) -> None:
    approval = order(run, 1)
    after = approval.approval_id if after == "self" else after

    html = logged_in(reviewer).get(f"{url(approval)}?after={after}").content.decode()

    assert "<mark>" not in html and 'class="after-decision"' not in html
    assert '<span class="action">Order 1 × A12</span>' in html


def test_with_none_left_the_queue_says_nothing_else_waits(reviewer: Any, run: Run) -> None:
    approval = order(run, 1)
    # Waiting, but not for rita: past its time.
    order(run, 2, age_s=2000, ttl_s=1000)
    client = logged_in(reviewer)

    response = decide(client, approval, "reject", note="not needed")

    assert response["Location"] == "/console/approvals/"
    queue = client.get(response["Location"]).content.decode()
    assert "Rejected “Order 1 × A12” (tc-1 in run r-orders): the agent is told why. " in queue
    assert "Nothing else waits for you.</li>" in queue


def test_a_vote_that_waits_for_a_second_reviewer_says_so_and_moves_on(
    reviewer: Any, run: Run
) -> None:
    first = order(run, 1, age_s=60, required=2)
    order(run, 2)

    response = decide(logged_in(reviewer), first, "approve")

    assert said(response) == [
        "Approved “Order 1 × A12” (tc-1 in run r-orders): 1 of 2 approvals; it waits for "
        "another reviewer · next: 1 of 1 waiting"
    ]
    assert Approval.objects.get(pk=first.pk).status == "pending"


def test_the_expired_one_is_not_next(reviewer: Any, run: Run) -> None:
    first = order(run, 1, age_s=60)
    stale = order(run, 2)
    Approval.objects.filter(pk=stale.pk).update(expires_at=timezone.now() - timedelta(seconds=1))

    response = decide(logged_in(reviewer), first, "approve")

    assert response["Location"] == "/console/approvals/"
