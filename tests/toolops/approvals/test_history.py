"""The approval queue's tabs: Waiting (the queue), Decided (who, when, the note) and
Expired (when), newest first and paginated, as links that work without JavaScript."""

# The console's personas are imported as fixtures, so test arguments shadow them.
# ruff: noqa: F811

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from tests.console.conftest import (  # noqa: F401 - fixtures shared with the console tests
    console_catalog,
    fast_password_hashing,
    logged_in,
    make_run,
    reviewer,
)
from toolops.approvals import selectors
from toolops.approvals.models import Approval
from toolops.models import Agent

from .test_console import hold

pytestmark = pytest.mark.django_db


def ended(approval: Approval, status: str, minutes_ago: float, **fields: Any) -> Approval:
    at = timezone.now() - timedelta(minutes=minutes_ago)
    Approval.objects.filter(pk=approval.pk).update(status=status, decided_at=at, **fields)
    return approval


def test_the_decided_and_expired_tabs_list_ended_approvals_newest_first(
    reviewer: Any, agent_a: tuple[Agent, str], console_catalog: Any
) -> None:
    run = make_run(agent_a[0], "r-hist")
    approved = ended(
        hold(run, "tc-1", step_index=1),
        "approved",
        30,
        decided_by=reviewer,
        note="customer confirmed by phone",
    )
    rejected = ended(
        hold(run, "tc-2", step_index=2),
        "rejected",
        10,
        decided_by=reviewer,
        note="amount looks wrong",
    )
    expired = ended(hold(run, "tc-3", step_index=3), "expired", 5)
    waiting = hold(run, "tc-4", step_index=4)
    client = logged_in(reviewer)

    decided = client.get("/console/approvals/", {"tab": "decided"})
    gone = client.get("/console/approvals/", {"tab": "expired"}).content.decode()
    queue = client.get("/console/approvals/").content.decode()

    rows = [(r.approval.approval_id, r.approval.status) for r in decided.context["history"]]
    assert rows == [(rejected.approval_id, "rejected"), (approved.approval_id, "approved")]
    page = decided.content.decode()
    row = page.split(f'id="approval-{approved.approval_id}"')[1].split("</tr>")[0]
    for text in ("approved", "rita", "customer confirmed by phone", '<time datetime="'):
        assert text in row, text
    assert expired.approval_id not in page and waiting.approval_id not in page
    assert expired.approval_id in gone and approved.approval_id not in gone
    assert '<a href="?tab=expired" aria-current="page">Expired <span class="badge">1</span>' in gone
    assert waiting.approval_id in queue and approved.approval_id not in queue
    assert '<a href="?tab=decided">Decided <span class="badge">2</span></a>' in queue


def test_the_history_is_paginated(
    reviewer: Any, agent_a: tuple[Agent, str], console_catalog: Any, monkeypatch: Any
) -> None:
    monkeypatch.setattr(selectors, "HISTORY_PER_PAGE", 1)
    run = make_run(agent_a[0], "r-pages")
    older = ended(hold(run, "tc-1", step_index=1), "expired", 20)
    newer = ended(hold(run, "tc-2", step_index=2), "expired", 10)
    client = logged_in(reviewer)

    first = client.get("/console/approvals/", {"tab": "expired"}).content.decode()
    second = client.get("/console/approvals/", {"tab": "expired", "page": 2}).content.decode()

    assert newer.approval_id in first and older.approval_id not in first
    assert older.approval_id in second and newer.approval_id not in second


def test_the_queue_says_just_now_for_a_fresh_hold(
    reviewer: Any, agent_a: tuple[Agent, str], console_catalog: Any
) -> None:
    hold(make_run(agent_a[0], "r-fresh"), "tc-1")

    page = logged_in(reviewer).get("/console/approvals/").content.decode()

    assert ">just now</time>" in page
    assert re.search(r"\b0 min|0\xa0minutes", page) is None
