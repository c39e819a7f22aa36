"""The saga's worker tasks. The database is the queue: a message only wakes a worker,
and the periodic sweep finds whatever a lost message or a dead worker left behind. Each
task loads by key, calls a service, and is safe to deliver twice."""

from __future__ import annotations

from celery import shared_task
from django.conf import settings

from compensations.services import compensation_run_next, run_conclude, runs_needing_work


@shared_task(acks_late=True, reject_on_worker_lost=True)
def compensate_run(run_pk: int) -> str | None:
    """Undo a run's compensations, newest first; then end the run."""
    while compensation_run_next(run_pk=run_pk):
        pass
    return run_conclude(run_pk=run_pk)


@shared_task(acks_late=True)
def sweep_compensations() -> int:
    """Wake the runs whose compensations nobody is working on."""
    runs = runs_needing_work(grace_s=settings.TOOLOPS_COMPENSATION_GRACE_S)
    for run_pk in runs:
        compensate_run.delay(run_pk)
    return len(runs)
