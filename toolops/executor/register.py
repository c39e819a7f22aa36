"""Compensation registration (DESIGN.md "Compensation"): a successful write that has an
undo registers it, args mapped from the call's args and result, in the statement that
records the result (record.py) — never a success without its undo. A write that succeeds
outside the request (reconciled by the worker, settled by a person) registers it in that
transaction, and a run that has already ended gets it settled as its ending settled the
others: discarded when it completed, handed to the saga worker when it was aborted.

The saga worker and the support desk (compensations/) take it from there."""

from __future__ import annotations

from django.db.models.functions import Now
from django.utils import timezone

from compensations.models import Compensation, Ticket, TicketEvent
from compensations.tickets import ticket_close, ticket_open
from toolops.models import Run, ToolCall
from toolops.queue import COMPENSATE_RUN, enqueue_on_commit
from toolops.tools import registry
from toolops.tools.mapping import resolve_mapping
from toolops.tools.spec import ToolSpec
from traces import services as traces

from .canonical import canonical_json
from .execution import Execution
from .keys import idempotency_key

CompensationStatus = Compensation.Status
ABORT_STATES = Run.ABORT_STATES


def compensation_for(execution: Execution) -> Compensation | None:
    """The unsaved compensation a call's record registers, or None (a read, a failure, an
    undo call, a tool without undo)."""
    call, spec = execution.call, execution.spec
    if not execution.budget.counted or call.status not in ToolCall.USABLE or spec.is_read:
        return None
    return compensation_build(call=call, spec=spec)


def compensation_build(*, call: ToolCall, spec: ToolSpec) -> Compensation | None:
    """The unsaved compensation a successful write registers, args mapped from its args
    and result; None when the tool has no undo. A mapping that finds nothing is kept as
    the compensation's `problem` (its ticket is opened with the record)."""
    if spec.compensation is None:
        return None
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
        run_id=f"undo/{call.call_id}",
        step_index=call.step_index,
        tool=spec.compensation.tool,
        canonical_args=canonical_json(args),
    )
    compensation = Compensation(
        run_id=call.run_id,
        call=call,
        tool=spec.compensation.tool,
        args=args,
        problem=problem,
        key=key,
    )
    # Mapped from the call's full args and result, so stored redacted like them (by the
    # undo tool's rules and the call's sensitive values), the full args sealed.
    traces.args_seal(compensation, spec=registry.get(compensation.tool), source=call)
    return compensation


def save_unmappable(*, compensation: Compensation) -> Ticket:
    """Save a compensation whose args could not be built, and open its ticket at once:
    the call's success stands, but nothing could undo it. Inside the caller's
    transaction, with the call's result."""
    compensation.save(force_insert=True)
    traces.sealed_save(compensation)
    return ticket_open(compensation, Ticket.Reason.UNMAPPABLE, compensation.problem)


def register_late(*, call: ToolCall, spec: ToolSpec | None) -> Compensation | None:
    """Register the undo of a call that succeeded outside the request (reconciled by the
    worker, or settled by a person), in the caller's transaction. A run that has already
    ended gets it settled the way its ending settled the others."""
    if spec is None or call.role != ToolCall.Role.CALL:
        return None
    compensation = compensation_build(call=call, spec=spec)
    if compensation is None or Compensation.objects.filter(call=call).exists():
        return None
    if compensation.problem:
        save_unmappable(compensation=compensation)
    else:
        compensation.save(force_insert=True)
        traces.sealed_save(compensation)
    run = Run.objects.get(pk=call.run_id)
    if run.status == Run.Status.COMPLETED:
        compensations_discard(run_pks=[run.pk])
    elif run.status in ABORT_STATES:
        compensations_start(run=run)
    return compensation


def compensations_discard(*, run_pks: list[int]) -> int:
    """A completed run's registered compensations will never be needed."""
    changed = Compensation.objects.filter(
        run_id__in=run_pks, status=CompensationStatus.REGISTERED
    ).update(status=CompensationStatus.DISCARDED, finished_at=timezone.now())
    for ticket in Ticket.objects.open().filter(
        run_id__in=run_pks, compensation__status=CompensationStatus.DISCARDED
    ):
        ticket_close(
            ticket, None, TicketEvent.Kind.CLOSED, "The run completed: its undo was never needed."
        )
    return changed


def compensations_start(*, run: Run) -> bool:
    """Hand an aborting run's registered compensations to the saga worker (in the
    caller's transaction; the worker is woken when it commits). False: nothing to
    compensate."""
    now = Now()  # the sweep judges its grace by the database's clock
    # The run's row lock first, as the saga's run_conclude takes it: an ending cannot slip
    # between these writes and its own look.
    Run.objects.select_for_update().filter(pk=run.pk).first()
    Compensation.objects.filter(run=run, status=CompensationStatus.REGISTERED).update(
        status=CompensationStatus.PENDING, queued_at=now
    )
    if not Compensation.objects.filter(run=run, status__in=Compensation.OPEN).exists():
        return False
    # A compensation registered after the run ended (a late reconcile) reopens the saga.
    Run.objects.filter(pk=run.pk, status__in=ABORT_STATES).update(
        status=Run.Status.ABORTING, ended_at=None
    )
    compensations_wake(run.pk)
    return True


def compensations_wake(run_pk: int) -> None:
    """Wake the saga worker for the run when the transaction commits."""
    enqueue_on_commit(COMPENSATE_RUN, run_pk)
