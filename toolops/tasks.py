"""Periodic and background work of the executor. Tasks load by key, call a service, and
survive being delivered twice."""

from __future__ import annotations

from celery import shared_task

from toolops import executor
from toolops.approvals.services import approvals_expire, approvals_stalled, approved_call_execute
from toolops.idle import idle_runs_abort

# Registered with the worker from here: toolops.notify is not an app of its own.
from toolops.notify import tasks as notify_tasks  # noqa: F401

# Expired idempotency records are deleted by the retention purge (traces.tasks.purge_traces).


@shared_task(acks_late=True)
def reconcile_unknown_calls() -> int:
    """Ask the query tools about unknown outcomes that are due (DESIGN.md "unknown")."""
    due = executor.unknown_calls_due()
    for pk in due:
        executor.call_reconcile(call_pk=pk)
    return len(due)


@shared_task(acks_late=True)
def sweep_stale_claims() -> int:
    """Settle claims whose holder died between claim and record, without re-sending an
    unsafe write blindly."""
    keys = executor.stale_claim_keys()
    for key in keys:
        executor.claim_recover(key=key)
    return len(keys)


@shared_task(acks_late=True, reject_on_worker_lost=True)
def execute_approved_call(approval_pk: int) -> str:
    """Run a call a reviewer approved, through the normal executor path. Safe to deliver
    twice: only the first delivery starts it."""
    return approved_call_execute(approval_pk=approval_pk)


@shared_task(acks_late=True)
def sweep_approvals() -> int:
    """End approvals nobody decided in time (`rejected`, reason `expired`), and start
    approved calls whose worker message was lost."""
    expired = approvals_expire()
    for pk in approvals_stalled():
        execute_approved_call.delay(pk)
    return expired


@shared_task(acks_late=True)
def abort_idle_runs() -> int:
    """Abort runs their agent left (no call for TOOLOPS_RUN_IDLE_ABORT_S), as an operator
    would: their undos go to the saga worker. Twice delivered: the second finds them
    aborted already."""
    return idle_runs_abort()
