"""Runs their agent left: flagged "no call for N min" on the runs list and the run's page,
and ended by the worker after TOOLOPS_RUN_IDLE_ABORT_S the way an operator's abort ends
them (undos handed to the saga worker), audited as by "ToolOps (idle)"."""

from __future__ import annotations

from datetime import timedelta
from typing import Any
from unittest.mock import patch

import pytest
from django.test import Client
from django.utils import timezone

from compensations.models import Compensation
from toolops.models import Agent, AuditEntry, Run
from toolops.tasks import abort_idle_runs

from .conftest import make_call, make_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def idle_settings(settings: Any) -> Any:
    settings.TOOLOPS_RUN_IDLE_FLAG_S = 600
    settings.TOOLOPS_RUN_IDLE_ABORT_S = 3600
    return settings


def quiet_run(agent: Agent, run_id: str, minutes: float, status: str = "succeeded") -> Run:
    """A running run whose one call was made and ended `minutes` ago."""
    at = timezone.now() - timedelta(minutes=minutes)
    run = make_run(agent, run_id, created_at=at - timedelta(seconds=5))
    call = make_call(
        run,
        f"{run_id}-tc",
        0,
        "reserve_stock",
        status,
        created_at=at,
        finished_at=at if status == "succeeded" else None,
    )
    if status == "succeeded":
        Compensation.objects.create(
            run=run, call=call, tool="release_stock", args={"reservation_id": "r-1"}, key=run_id
        )
    return run


def test_it_flags_a_run_with_no_call_for_ten_minutes(
    reviewer_client: Client, agent_a: tuple[Agent, str], idle_settings: Any
) -> None:
    quiet = quiet_run(agent_a[0], "r-quiet", minutes=12)
    quiet_run(agent_a[0], "r-busy", minutes=1)
    quiet_run(agent_a[0], "r-held", minutes=30, status="pending_approval")  # a reviewer's turn
    ended = quiet_run(agent_a[0], "r-done", minutes=40)
    Run.objects.filter(pk=ended.pk).update(status="completed")

    listed = reviewer_client.get("/console/runs/")
    page = reviewer_client.get(f"/console/runs/{quiet.pk}/").content.decode()

    idle = {run.run_id: run.idle for run in listed.context["page"]}
    assert idle == {"r-quiet": "no call for 12 min", "r-busy": "", "r-held": "", "r-done": ""}
    assert '<span class="badge idle"' in listed.content.decode()
    assert ">no call for 12 min</span>" in page


def test_the_worker_ends_runs_idle_past_the_limit_as_an_operator_abort_would(
    agent_a: tuple[Agent, str], idle_settings: Any, django_capture_on_commit_callbacks: Any
) -> None:
    left = quiet_run(agent_a[0], "r-left", minutes=61)
    recent = quiet_run(agent_a[0], "r-recent", minutes=59)
    held = quiet_run(agent_a[0], "r-held", minutes=90, status="pending_approval")

    with (
        patch("compensations.tasks.compensate_run.delay", autospec=True) as delay,
        django_capture_on_commit_callbacks(execute=True),
    ):
        assert abort_idle_runs() == 1

    left.refresh_from_db()
    assert left.status == "aborting"
    assert left.end_reason == "The agent made no call for 60 min: ToolOps ended the run it left."
    assert Compensation.objects.get(run=left).status == "pending"
    delay.assert_called_once_with(left.pk)
    entry = AuditEntry.objects.get(action="run.abort", object_id="r-left")
    assert entry.actor is None
    assert entry.detail["via"] == "ToolOps (idle)"
    assert "by ToolOps (idle)" in entry.summary
    for run in (recent, held):
        run.refresh_from_db()
        assert run.status == "running"
    # Delivered twice: the second finds nothing left to end.
    assert abort_idle_runs() == 0
    assert AuditEntry.objects.filter(action="run.abort").count() == 1


def test_it_never_ends_idle_runs_when_the_limit_is_zero(
    agent_a: tuple[Agent, str], idle_settings: Any
) -> None:
    idle_settings.TOOLOPS_RUN_IDLE_ABORT_S = 0
    run = quiet_run(agent_a[0], "r-left", minutes=600)

    assert abort_idle_runs() == 0

    run.refresh_from_db()
    assert run.status == "running"
    assert not AuditEntry.objects.filter(action="run.abort").exists()
