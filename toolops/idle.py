"""Runs their agent left. An agent that crashes or gives up never completes or aborts its
run, so the run would stay "running" for ever, its registered undos never run and its
budget never freed. A running run with no call for TOOLOPS_RUN_IDLE_FLAG_S is flagged on
the console ("no call for 12 min"); after TOOLOPS_RUN_IDLE_ABORT_S (0: never) the worker
aborts it the way an operator's abort does: its compensations handed to the saga
worker, audited as by "ToolOps (idle)".

A call that waits (for a reviewer, or still running) is the run's business going on, not
an agent gone: such a run is never idle."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.utils import timezone

from toolops import services
from toolops.audit.services import Action, audit_record
from toolops.models import Run, ToolCall

IDLE_ACTOR = "ToolOps (idle)"
WAITING = (ToolCall.Status.PENDING_APPROVAL, ToolCall.Status.IN_PROGRESS)


def idle_text(*, run: Run, calls: Iterable[ToolCall], now: datetime | None = None) -> str:
    """ "no call for 12 min" when `run` (with its agent's `calls`, created_at,
    finished_at and status read) is idle past TOOLOPS_RUN_IDLE_FLAG_S; else ""."""
    flag_s = settings.TOOLOPS_RUN_IDLE_FLAG_S
    if run.status != Run.Status.RUNNING or flag_s <= 0:
        return ""
    last = run.created_at
    for call in calls:
        if call.status in WAITING:
            return ""
        last = max(last, call.created_at, call.finished_at or call.created_at)
    quiet = ((now or timezone.now()) - last).total_seconds()
    if quiet < flag_s:
        return ""
    return f"no call for {_span(quiet)}"


def _span(seconds: float) -> str:
    minutes = int(seconds // 60)
    if minutes < 120:
        return f"{minutes} min"
    hours = minutes // 60
    return f"{hours} h" if hours < 48 else f"{hours // 24} days"


def idle_runs(*, idle_s: float, now: datetime | None = None) -> QuerySet[Run]:
    """Running runs with no call made, ended or waiting in the last `idle_s` seconds."""
    since = (now or timezone.now()) - timedelta(seconds=idle_s)
    recent = ToolCall.objects.filter(run=OuterRef("pk")).filter(
        Q(created_at__gte=since) | Q(finished_at__gte=since) | Q(status__in=WAITING)
    )
    return Run.objects.filter(status=Run.Status.RUNNING, created_at__lt=since).exclude(
        Exists(recent)
    )


def run_idle_abort(*, run: Run, idle_s: float) -> bool:
    """Abort `run` as an operator would, audited as by IDLE_ACTOR, if it is still idle
    (its agent may have come back since it was listed). True when it was aborted."""
    minutes = f"{idle_s / 60:g} min"
    reason = f"The agent made no call for {minutes}: ToolOps ended the run it left."
    with transaction.atomic():
        # Still idle, read with the row locked: the abort and its audit, or nothing.
        if not idle_runs(idle_s=idle_s).filter(pk=run.pk).select_for_update().exists():
            return False
        before = run.status
        run = services.run_abort(run=run, reason=reason)
        audit_record(
            actor=None,
            action=Action.RUN_ABORT,
            obj=run,
            detail={"from": before, "to": run.status, "reason": reason, "via": IDLE_ACTOR},
            summary=f"Aborted ({before} → {run.status}) by {IDLE_ACTOR}: {reason}",
        )
    return True


def idle_runs_abort(*, limit: int = 100) -> int:
    """End the runs idle past TOOLOPS_RUN_IDLE_ABORT_S (0: never), oldest first; at most
    `limit` a round, the rest at the next. How many were aborted."""
    idle_s = settings.TOOLOPS_RUN_IDLE_ABORT_S
    if idle_s <= 0:
        return 0
    runs = list(idle_runs(idle_s=idle_s).order_by("created_at", "pk")[:limit])
    return sum(run_idle_abort(run=run, idle_s=idle_s) for run in runs)
