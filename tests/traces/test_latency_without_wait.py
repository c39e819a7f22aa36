"""A call held for a reviewer: its latency runs from its release, never from its
creation, on the Metrics page and on /metrics alike; the wait is the approval wait's
figure (and toolops_approval_wait_seconds), shown on its own."""

# The metrics page tests' fixtures are imported, so test arguments shadow them.
# ruff: noqa: F811

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from toolops.approvals.models import Approval
from toolops.models import Agent

from .test_metrics_page import console, make_call, make_run, operator, tile  # noqa: F401

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fresh_scrapes(settings: Any) -> None:
    settings.TOOLOPS_METRICS_CACHE_S = 0


def approved_after_a_long_wait(agent: Agent) -> None:
    """A charge held 30 minutes; the worker took it up 1 s after the decision and it
    ran in 0.5 s."""
    now = timezone.now()
    held = now - timedelta(minutes=30)
    decided = now - timedelta(seconds=1.5)
    approval = Approval.objects.create(
        run=make_run(agent),
        tool="charge",
        reason="irreversible",
        args_hash="x",
        status="approved",
        created_at=held,
        decided_at=decided,
        execution_started_at=decided + timedelta(seconds=1),
        expires_at=held + timedelta(hours=1),
    )
    make_call(approval.run, "charge", created_at=held, finished_at=now, approval=approval)


def test_an_approved_calls_latency_leaves_out_its_wait(
    agent_a: tuple[Agent, str], shop: Any, console: Client
) -> None:
    approved_after_a_long_wait(agent_a[0])

    html = console.get("/console/metrics/", {"tool": "charge"}).content.decode()

    assert tile(html, "charge", "latency").startswith(
        "Latency p50 / p95 / p99 500 ms / 500 ms / 500 ms"
    )
    wait = tile(html, "charge", "approval-wait")
    assert wait.startswith("Approval wait 30.0 min mean of 1 ended")


def test_the_prometheus_histogram_leaves_out_the_wait_too(
    agent_a: tuple[Agent, str], shop: Any, console: Client
) -> None:
    approved_after_a_long_wait(agent_a[0])

    text = console.get("/metrics").content.decode()

    seconds = re.search(
        r'^toolops_tool_call_duration_seconds_sum\{tool="charge"\} (\S+)$', text, re.M
    )
    assert seconds is not None and float(seconds[1]) == pytest.approx(0.5, abs=0.01)
    waited = re.search(r"^toolops_approval_wait_seconds_sum (\S+)$", text, re.M)
    assert waited is not None and float(waited[1]) == pytest.approx(1798.5, abs=1)
