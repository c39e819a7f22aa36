"""The saga (DESIGN.md "Compensation"): register an undo with the call it undoes, discard
on complete, and on abort run the undos newest first, each an executor call of the undo
tool, dead-lettering what still fails. Writes that several models share go here; the
executor reaches this app only through this module.

Every transition is a conditional UPDATE on the compensation's status, so a duplicate
task message, the sweep and a person pressing a button can race and still agree."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from compensations import live
from compensations.models import Compensation, Ticket, TicketEvent
from toolops.models import IdempotencyRecord, Run, ToolCall
from traces import services as traces

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser

    from toolops.tools.spec import ToolSpec

CS = Compensation.Status
Kind = TicketEvent.Kind
ABORT_STATES = Run.ABORT_STATES


# -- registration (called by the executor) --------------------------------------------


def compensation_build(*, call: ToolCall, spec: ToolSpec) -> Compensation | None:
    """The unsaved compensation a successful write registers, args mapped from its args
    and result; None when the tool has no undo. A mapping that finds nothing is kept as
    the compensation's `problem` (the executor then opens a ticket with it)."""
    if spec.compensation is None:
        return None
    from toolops.executor.canonical import canonical_json
    from toolops.executor.keys import idempotency_key
    from toolops.executor.reconcile import resolve_mapping

    missing: list[str] = []
    cannot = f"{call.tool} succeeded but its undo {spec.compensation.tool} cannot be built"
    problem = ""
    try:
        args = resolve_mapping(spec.compensation, spec, call, missing)
    except traces.SealedArgsUnavailable as exc:
        # Mapped from placeholders, the undo would undo nothing: a ticket says why instead.
        args, problem = {}, f"{cannot}: {exc}"
    else:
        if missing:
            problem = f"{cannot}: {', '.join(missing)} not found in the call"
    key = idempotency_key(
        run_id=f"undo/{call.call_id}", step_index=call.step_index, tool=spec.compensation.tool,
        canonical_args=canonical_json(args),
    )  # fmt: skip
    compensation = Compensation(
        run_id=call.run_id, call=call, tool=spec.compensation.tool, args=args, problem=problem,
        key=key,
    )  # fmt: skip
    # Mapped from the call's full args and result, so stored redacted like them (by the
    # undo tool's rules and the call's sensitive values), the full args sealed.
    from toolops.tools import registry

    traces.args_seal(compensation, spec=registry.get(compensation.tool), source=call)
    return compensation


def compensation_save_unmappable(*, compensation: Compensation) -> Ticket:
    """Save a compensation whose args could not be built, and open its ticket at once:
    the call's success stands, but nothing could undo it. Inside the caller's
    transaction, with the call's result."""
    compensation.save(force_insert=True)
    traces.sealed_save(compensation)
    return ticket_open(compensation, Ticket.Reason.UNMAPPABLE, compensation.problem)


def compensation_register(*, call: ToolCall, spec: ToolSpec | None) -> Compensation | None:
    """Register the undo of a call that succeeded outside the request (reconciled by the
    worker, or settled by a person), in the caller's transaction. A run that has already
    ended gets it settled the way its ending settles the others."""
    if spec is None or call.role != ToolCall.Role.CALL:
        return None
    compensation = compensation_build(call=call, spec=spec)
    if compensation is None or Compensation.objects.filter(call=call).exists():
        return None
    if compensation.problem:
        compensation_save_unmappable(compensation=compensation)
    else:
        compensation.save(force_insert=True)
        traces.sealed_save(compensation)
    run = Run.objects.get(pk=call.run_id)
    if run.status == Run.Status.COMPLETED:
        runs_discard(run_pks=[run.pk])
    elif run.status in ABORT_STATES:
        compensations_start(run=run)
    return compensation


# -- complete and abort ------------------------------------------------------------------


def runs_discard(*, run_pks: list[int]) -> int:
    """A completed run's registered compensations will never be needed."""
    changed = Compensation.objects.filter(run_id__in=run_pks, status=CS.REGISTERED).update(
        status=CS.DISCARDED, finished_at=timezone.now()
    )
    for ticket in Ticket.objects.open().filter(
        run_id__in=run_pks, compensation__status=CS.DISCARDED
    ):
        ticket_close(ticket, None, Kind.CLOSED, "The run completed: its undo was never needed.")
    return changed


def compensations_start(*, run: Run) -> bool:
    """Hand an aborting run's registered compensations to the worker (in the caller's
    transaction; the task is enqueued when it commits). False: nothing to compensate."""
    now = timezone.now()
    # The run's row lock first, as run_conclude takes it: an ending cannot slip between
    # these writes and its own look.
    Run.objects.select_for_update().filter(pk=run.pk).first()
    Compensation.objects.filter(run=run, status=CS.REGISTERED).update(
        status=CS.PENDING, queued_at=now
    )
    if not Compensation.objects.filter(run=run, status__in=Compensation.OPEN).exists():
        return False
    # A compensation registered after the run ended (a late reconcile) reopens the saga.
    Run.objects.filter(pk=run.pk, status__in=ABORT_STATES).update(
        status=Run.Status.ABORTING, ended_at=None
    )
    wake(run.pk)
    return True


def wake(run_pk: int) -> None:
    from compensations.tasks import compensate_run as compensate_run_task

    transaction.on_commit(lambda: compensate_run_task.delay(run_pk))


# -- the worker ----------------------------------------------------------------------------


def compensation_run_next(*, run_pk: int) -> bool:
    """Run the run's newest compensation still to do. True when there may be more to do
    now; False when the rest is someone else's (a live worker holds the current one) or
    nothing is left."""
    current = (
        Compensation.objects.select_related("call", "run")
        .filter(run_id=run_pk, status__in=[CS.PENDING, CS.RUNNING])
        .order_by("-pk")
        .first()
    )
    if current is None:
        # A write in flight when the run was aborted may have registered its undo since:
        # it is undone too (after the older ones, which had already run).
        return bool(
            Compensation.objects.filter(
                run_id=run_pk, status=CS.REGISTERED, run__status=Run.Status.ABORTING
            ).update(status=CS.PENDING, queued_at=timezone.now())
        )
    if current.status == CS.PENDING:
        # A duplicate message or the sweep may race us for this row.
        claimed = Compensation.objects.filter(pk=current.pk, status=CS.PENDING).update(
            status=CS.RUNNING, started_at=timezone.now(), rounds=current.rounds + 1
        )
        if not claimed:
            return True
        current.rounds += 1
    from toolops.executor.undo import undo_execute

    args, problem = None, current.problem
    try:
        args = traces.args_open(current)
    except traces.SealedArgsUnavailable as exc:
        # The round fails with nothing sent, and dead-letters into a ticket that says why.
        problem = f"{exc}; nothing was sent"
    # Reverse order holds because only the newest open compensation is ever run; an
    # older one waits until it has succeeded or been dead-lettered.
    undo = undo_execute(
        run=current.run, undoes=current.call, tool=current.tool, args=args,
        problem=problem, key=current.key, round_number=current.rounds,
        trace_id=current.trace_id,
    )  # fmt: skip
    if undo is None:
        return False
    compensation_finish(compensation=current, undo=undo)
    return True


def compensation_finish(*, compensation: Compensation, undo: ToolCall) -> None:
    """Settle a compensation by its undo call's outcome: succeeded, or dead-lettered with
    a ticket. Never an infinite retry, never a silent drop."""
    ok = undo.status in ToolCall.USABLE
    with transaction.atomic():
        status = CS.SUCCEEDED if ok else CS.DEAD_LETTERED
        error = "" if ok else (undo.error_message or undo.feedback or undo.status)
        changed = Compensation.objects.filter(pk=compensation.pk, status=CS.RUNNING).update(
            status=status, undo_call=undo, last_error=error[:2000], finished_at=timezone.now()
        )
        if not changed:
            return
        traces.run_changed(run_pk=compensation.run_id)
        compensation.status, compensation.last_error = status, error
        ticket = Ticket.objects.filter(compensation=compensation).first()
        attempts = f"{undo.attempts} attempt{'s' if undo.attempts != 1 else ''}"
        if ok and ticket is not None and ticket.status == Ticket.Status.OPEN:
            ticket_close(ticket, None, Kind.SUCCEEDED, f"{undo.tool} succeeded ({attempts}).")
        elif not ok:
            text = f"{undo.tool} still failing after {attempts}: {error}"
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
        failed = Compensation.objects.filter(run_id=run_pk, status=CS.DEAD_LETTERED).exists()
        final = Run.Status.COMPENSATION_FAILED if failed else Run.Status.ABORTED
        run.update(status=final, ended_at=timezone.now())
        traces.run_changed(run_pk=run_pk)
    return final


# -- tickets, inside the caller's transaction (the desk's actions use these too) ----------


def ticket_open(compensation: Compensation, reason: str, text: str) -> Ticket:
    now = timezone.now()
    ticket, created = Ticket.objects.get_or_create(
        compensation=compensation,
        defaults={"run_id": compensation.run_id, "tool": compensation.tool, "reason": reason},
    )
    if created:
        ticket_event(ticket, None, Kind.OPENED, text)
        return ticket
    kind = Kind.DEAD_LETTERED if ticket.status == Ticket.Status.OPEN else Kind.REOPENED
    if ticket.reason == Ticket.Reason.UNMAPPABLE:
        reason = ticket.reason  # still why: nothing could be sent
    Ticket.objects.filter(pk=ticket.pk).update(
        status=Ticket.Status.OPEN, closed_at=None, updated_at=now, reason=reason
    )
    ticket_event(ticket, None, kind, text)
    return ticket


def ticket_close(ticket: Ticket, by: AbstractBaseUser | None, kind: str, text: str) -> None:
    now = timezone.now()
    Ticket.objects.filter(pk=ticket.pk).update(
        status=Ticket.Status.CLOSED, closed_at=now, updated_at=now
    )
    ticket.status, ticket.closed_at = Ticket.Status.CLOSED, now
    ticket_event(ticket, by, kind, text)


def ticket_event(ticket: Ticket, by: AbstractBaseUser | None, kind: str, text: str) -> TicketEvent:
    event = TicketEvent.objects.create(ticket=ticket, actor=by, kind=kind, text=text[:4000])
    live.tickets_changed(ticket_id=ticket.pk)
    return event


# -- the sweep ---------------------------------------------------------------------------------


def runs_needing_work(*, grace_s: float = 10.0, limit: int = 100) -> list[int]:
    """Runs whose saga a lost message or a dead worker left behind: queued compensations
    nobody picked up within `grace_s`, running ones whose undo claim lapsed (or never
    began), and aborting runs with nothing left but their ending. Late registrations in
    ended runs are settled on the way."""
    now = timezone.now()
    since = now - timedelta(seconds=grace_s)
    for run in Run.objects.filter(
        compensations__status=CS.REGISTERED, status__in=[Run.Status.COMPLETED, *ABORT_STATES]
    ).distinct()[:limit]:
        with transaction.atomic():
            if run.status == Run.Status.COMPLETED:
                runs_discard(run_pks=[run.pk])
            else:
                compensations_start(run=run)
    # A running undo is alive while its claim's lease holds (each attempt renews it);
    # lapsed, never made, or recorded without the compensation settled: resume it.
    held = IdempotencyRecord.objects.filter(
        state=IdempotencyRecord.State.CLAIMED, lease_until__gte=now
    ).values("key")
    stalled = Compensation.objects.filter(
        Q(status=CS.PENDING, queued_at__lt=since)
        | (Q(status=CS.RUNNING, started_at__lt=since) & ~Q(key__in=held))
    )
    runs = set(stalled.values_list("run_id", flat=True)[:limit])
    idle = Run.objects.filter(status=Run.Status.ABORTING).exclude(
        compensations__status__in=Compensation.OPEN
    )
    runs.update(idle.values_list("pk", flat=True)[:limit])
    return sorted(runs)
