"""The saga worker (DESIGN.md "Compensation"): an aborted run's undos run newest first,
each an executor call of the undo tool (toolops.executor.undo_execute), and what still
fails is dead-lettered into a ticket; then the run ends. The executor registered each
undo with the call it undoes, and discarded or handed them over when the run ended
(toolops/executor/register.py); the support desk (desk.py) works the tickets.

Every transition is a conditional UPDATE on the compensation's status, so a duplicate
task message, the sweep and a person pressing a button can race and still agree."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.db.models.functions import Now
from django.utils import timezone

from compensations.models import Compensation, Ticket, TicketEvent
from compensations.tickets import ticket_close, ticket_open
from toolops import executor
from toolops.crash import crash_point
from toolops.models import IdempotencyRecord, Run, ToolCall
from toolops.queue import COMPENSATE_RUN, enqueue_at
from toolops.tools import registry
from toolops.tools.wording import error_sentence
from traces import services as traces

CompensationStatus = Compensation.Status
Kind = TicketEvent.Kind
ABORT_STATES = Run.ABORT_STATES


# -- the worker ----------------------------------------------------------------------------


def compensation_run_next(*, run_pk: int) -> bool:
    """Run the run's newest compensation still to do. True when there may be more to do
    now; False when the rest is someone else's (a live worker holds the current one) or
    nothing is left."""
    current = (
        Compensation.objects.select_related("call", "run")
        .filter(run_id=run_pk, status__in=[CompensationStatus.PENDING, CompensationStatus.RUNNING])
        .order_by("-pk")
        .first()
    )
    if current is None:
        # A write in flight when the run was aborted may have registered its undo since:
        # it is undone too (after the older ones, which had already run).
        return bool(
            Compensation.objects.filter(
                run_id=run_pk, status=CompensationStatus.REGISTERED, run__status=Run.Status.ABORTING
            ).update(status=CompensationStatus.PENDING, queued_at=Now())
        )
    if current.status == CompensationStatus.PENDING:
        until = breaker_wait(tool=current.tool, queued_at=current.queued_at)
        if until is not None:
            # Its breaker would refuse it unsent: it waits, and a message wakes us then.
            Compensation.objects.filter(pk=current.pk, status=CompensationStatus.PENDING).update(
                not_before=until
            )
            # `until` is the database's time: a process clock behind it would wake us
            # early and find the breaker still open, so never sooner than in a second.
            at = max(until, timezone.now() + timedelta(seconds=1))
            enqueue_at(COMPENSATE_RUN, run_pk, at=at)
            return False
        # A duplicate message or the sweep may race us for this row.
        claimed = Compensation.objects.filter(
            pk=current.pk, status=CompensationStatus.PENDING
        ).update(status=CompensationStatus.RUNNING, started_at=Now(), rounds=current.rounds + 1)
        if not claimed:
            return True
        current.rounds += 1
    args, problem = None, current.problem
    try:
        args = traces.args_open(current)
    except traces.SealedArgsUnavailable as exc:
        # The round fails with nothing sent, and dead-letters into a ticket that says why.
        problem = f"{exc}; nothing was sent"
    # Reverse order holds because only the newest open compensation is ever run; an
    # older one waits until it has succeeded or been dead-lettered.
    undo = executor.undo_execute(
        run=current.run,
        undoes=current.call,
        tool=current.tool,
        args=args,
        problem=problem,
        key=current.key,
        round_number=current.rounds,
        trace_id=current.trace_id,
    )
    if undo is None:
        return False
    crash_point("mid-compensation")  # fault tests: the undo recorded, its row still running
    compensation_finish(compensation=current, undo=undo)
    return True


def breaker_wait(*, tool: str, queued_at: datetime | None) -> datetime | None:
    """When a queued undo of `tool` may go out, if its breaker would refuse it now: the
    end of the cool-down, or of the probe under way. None: send it now — the breaker
    admits it, or the undo has waited TOOLOPS_COMPENSATION_BREAKER_WAIT_S already (then
    a refusal dead-letters it, and its ticket says why). `queued_at` None: just now."""
    breaker = executor.breaker_state_of(executor.breaker_states(), tool)
    if not breaker.refuses or breaker.until is None:
        return None
    waited = timezone.now() - (queued_at or timezone.now())
    if waited.total_seconds() > settings.TOOLOPS_COMPENSATION_BREAKER_WAIT_S:
        return None
    return breaker.until


def compensation_finish(*, compensation: Compensation, undo: ToolCall) -> None:
    """Settle a compensation by its undo call's outcome: succeeded, or dead-lettered with
    a ticket. Never an infinite retry, never a silent drop."""
    ok = undo.status in ToolCall.USABLE
    with transaction.atomic():
        status = CompensationStatus.SUCCEEDED if ok else CompensationStatus.DEAD_LETTERED
        error = "" if ok else (undo.error_message or undo.feedback or undo.status)
        changed = Compensation.objects.filter(
            pk=compensation.pk, status=CompensationStatus.RUNNING
        ).update(status=status, undo_call=undo, last_error=error[:2000], finished_at=timezone.now())
        if not changed:
            return
        traces.run_changed(run_pk=compensation.run_id)
        compensation.status, compensation.last_error = status, error
        ticket = Ticket.objects.filter(compensation=compensation).first()
        attempts = f"{undo.attempts} attempt{'s' if undo.attempts != 1 else ''}"
        if ok and ticket is not None and ticket.status == Ticket.Status.OPEN:
            ticket_close(ticket, None, Kind.SUCCEEDED, f"{undo.tool} succeeded ({attempts}).")
        elif not ok:
            said = error_sentence(error, tool=undo.tool, spec=registry.get(undo.tool))
            text = f"{undo.tool} still failing after {attempts}: {said}"
            ticket_open(compensation, Ticket.Reason.DEAD_LETTERED, text)


def run_conclude(*, run_pk: int) -> str | None:
    """End an aborting run once nothing is left to compensate: `aborted` when every
    compensation succeeded, was discarded or resolved; else `compensation_failed`.

    Not while one of the agent's writes is still in flight: its undo may yet register
    (the sweep then hands it on, and wakes the run again)."""
    with transaction.atomic():
        # Locked: a retry or a late registration reopening the saga waits for us, or we
        # see what it did.
        run = Run.objects.select_for_update().filter(pk=run_pk, status=Run.Status.ABORTING)
        if run.first() is None:
            return None
        if Compensation.objects.filter(run_id=run_pk, status__in=Compensation.OPEN).exists():
            return None
        in_flight = ToolCall.objects.agent_calls().filter(
            run_id=run_pk, status=ToolCall.Status.IN_PROGRESS
        )
        if in_flight.exclude(idempotency_key="").exists():
            return None
        failed = Compensation.objects.filter(
            run_id=run_pk, status=CompensationStatus.DEAD_LETTERED
        ).exists()
        final = Run.Status.COMPENSATION_FAILED if failed else Run.Status.ABORTED
        run.update(status=final, ended_at=timezone.now())
        traces.run_changed(run_pk=run_pk)
    return final


# -- the sweep ---------------------------------------------------------------------------------


def runs_needing_work(*, grace_s: float = 10.0, limit: int = 100) -> list[int]:
    """Runs whose saga a lost message or a dead worker left behind: queued compensations
    nobody picked up within `grace_s`, running ones whose undo claim lapsed (or never
    began), and aborting runs with nothing left but their ending. Late registrations in
    ended runs are settled on the way."""
    # The database's clock, as queued_at and started_at were written by it.
    now = Now()
    since = now - timedelta(seconds=grace_s)
    for run in Run.objects.filter(
        compensations__status=CompensationStatus.REGISTERED,
        status__in=[Run.Status.COMPLETED, *ABORT_STATES],
    ).distinct()[:limit]:
        with transaction.atomic():
            if run.status == Run.Status.COMPLETED:
                executor.compensations_discard(run_pks=[run.pk])
            else:
                executor.compensations_start(run=run)
    # A running undo is alive while its claim's lease holds (each attempt renews it);
    # lapsed, never made, or recorded without the compensation settled: resume it.
    held = IdempotencyRecord.objects.filter(
        state=IdempotencyRecord.State.CLAIMED, lease_until__gte=now
    ).values("key")
    # A round waiting for its breaker (not_before) is woken by its own message then.
    due = Q(not_before__isnull=True) | Q(not_before__lte=now)
    stalled = Compensation.objects.filter(
        (Q(status=CompensationStatus.PENDING, queued_at__lt=since) & due)
        | (Q(status=CompensationStatus.RUNNING, started_at__lt=since) & ~Q(key__in=held))
    )
    runs = set(stalled.values_list("run_id", flat=True)[:limit])
    idle = Run.objects.filter(status=Run.Status.ABORTING).exclude(
        compensations__status__in=Compensation.OPEN
    )
    runs.update(idle.values_list("pk", flat=True)[:limit])
    return sorted(runs)
