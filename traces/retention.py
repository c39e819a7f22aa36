"""Retention: what ToolOps stores about tool calls goes TOOLOPS_RETENTION_DAYS after it
stopped being of use to anyone (docs/retention.md).

Past retention, and deleted:
- an ended run (completed, aborted, compensation_failed) whose `ended_at` is more than N
  days ago, with everything under it: calls and attempts (the stored spans),
  compensations, tickets and their events, approvals and their votes. Unless something
  still needs it: an open ticket, a pending approval, an open compensation, a call whose
  outcome is not settled, or an idempotency record that can still replay one of its
  calls (a replay answers from the call row);
- an attempt that started more than N days ago, in a run that is kept (still running, or
  ended less than N days ago after a long life). Not while its call is unsettled or its
  run busy (aborting, open ticket, pending approval, open compensation): those attempts
  are the evidence a person settles from. The call rows stay: a long-open run still
  answers replays and still sums its usage (from the calls, never the attempts);
- an idempotency record that is recorded and past its own `expires_at` (its TTL, not N
  days; a claim is left to the stale-claim sweep);
- a replay count of a minute more than N days ago;
- a sealed args row created more than N days ago that no call (by `call_id`) and no
  compensation (by `key`) refers to any more;
- an agent's rate window (toolops/api/allowance.py) of a minute before the last one: no
  process counts in it any more. Not history: gone within the hour, whatever N is.
Kept, never purged: the audit log (toolops/audit/: every human action, including who read
full args) and the FullArgsRead rows recorded before it. An audit trail outlives the
spans it is about: an entry names its object as text (its id and console link), never by
a foreign key that a purge could cascade through.

Every batch is one short transaction (a single DELETE, or for runs one lock-and-delete),
so the purge never holds locks for long; a run of the purge stops starting batches when
its time is up, and the next one carries on. Each query walks an index (docs/retention.md
lists them), and the functions that build them are public so that a test can EXPLAIN them.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from datetime import datetime, timedelta
from typing import Any

from django.db import connection, transaction
from django.db.models import Exists, Field, Model, OuterRef, Q, QuerySet
from django.db.models.functions import Now
from django.utils import timezone

from compensations.models import Compensation, Ticket
from toolops.models import Approval, Attempt, IdempotencyRecord, RateWindow, Run, ToolCall
from traces.models import ReplayCount, SealedArgs

log = logging.getLogger(__name__)

# An allowlist, not "everything but running": a status added later is kept until someone
# decides what its end is.
ENDED = (Run.Status.COMPLETED, Run.Status.ABORTED, Run.Status.COMPENSATION_FAILED)
# Outcomes still being worked out, by the executor, the reconciler or a person.
UNSETTLED = (*ToolCall.WAITING, ToolCall.Status.UNKNOWN)

# Primary keys per DELETE. Runs go fewer at a time: each brings its calls and what hangs
# off them into the same transaction.
BATCH = 2000
RUNS_PER_BATCH = 100
# Per run of the purge. Hourly runs of four minutes drain a backlog (a first deployment on
# an old database) within hours and never queue behind each other.
MAX_SECONDS = 240.0

# What the purge reports even when it deleted none of it.
KINDS = (
    "toolops.IdempotencyRecord",
    "toolops.Run",
    "toolops.ToolCall",
    "toolops.Attempt",
    "traces.ReplayCount",
    "traces.SealedArgs",
)


def run_busy(run_id: Any) -> Q:
    """Someone is still working on the run `run_id` names (an OuterRef): a ticket open
    for support, a call waiting for a reviewer, an undo still to be done."""
    return Q(
        Exists(Ticket.objects.open().filter(run_id=run_id))
        | Exists(Approval.objects.pending().filter(run_id=run_id))
        | Exists(Compensation.objects.filter(run_id=run_id, status__in=Compensation.OPEN))
    )


def runs_past_retention(*, cutoff: datetime) -> QuerySet[Run]:
    """Ended runs whose end is before `cutoff` and that nothing holds back, oldest first
    (index run_ended_at)."""
    live_key = IdempotencyRecord.objects.filter(
        Q(state=IdempotencyRecord.State.CLAIMED) | Q(expires_at__gte=Now()),
        key=OuterRef("idempotency_key"),
        call_ref=OuterRef("call_id"),
    )
    held_calls = ToolCall.objects.filter(run_id=OuterRef("pk")).filter(
        Q(status__in=UNSETTLED) | Exists(live_key)
    )
    return (
        Run.objects.filter(ended_at__lt=cutoff, status__in=ENDED)
        .exclude(run_busy(OuterRef("pk")))
        .exclude(Exists(held_calls))
        .order_by("ended_at")
    )


def attempts_past_retention(*, tool: str, cutoff: datetime) -> QuerySet[Attempt]:
    """One tool's attempts that started before `cutoff`, but for those of unsettled calls
    and busy runs (index on (tool, started_at))."""
    return (
        Attempt.objects.filter(tool=tool, started_at__lt=cutoff)
        .exclude(call__status__in=UNSETTLED)
        .exclude(call__run__status=Run.Status.ABORTING)
        .exclude(run_busy(OuterRef("call__run_id")))
        .order_by()
    )


def replay_counts_past_retention(*, tool: str, cutoff: datetime) -> QuerySet[ReplayCount]:
    """One tool's replay counts of minutes before `cutoff` (unique (tool, minute))."""
    return ReplayCount.objects.filter(tool=tool, minute__lt=cutoff).order_by()


def rate_windows_dead(*, agent_id: int, minute: int) -> QuerySet[RateWindow]:
    """One agent's rate windows before the one of `minute` - 1 (epoch seconds // 60): the
    processes count in the current window and, for a moment at its turn, the last one
    (an index leading with the agent: its foreign key's, or rate_window_unique)."""
    return RateWindow.objects.filter(agent_id=agent_id, window__lt=minute - 1).order_by()


def idempotency_records_expired() -> QuerySet[IdempotencyRecord]:
    """Recorded records past their own expiry, by the database's clock, as the claim set
    it (index on expires_at)."""
    return IdempotencyRecord.objects.filter(
        state=IdempotencyRecord.State.RECORDED, expires_at__lt=Now()
    ).order_by()


def sealed_args_unreferenced(*, cutoff: datetime) -> QuerySet[SealedArgs]:
    """Sealed args written before `cutoff` that no call and no compensation refers to
    (sealed_args_created; call_call_id_unique and compensation_key for the look-ups)."""
    owner = OuterRef("digest")  # a call's call_id, or a compensation's key
    return (
        SealedArgs.objects.filter(created_at__lt=cutoff)
        .exclude(Exists(ToolCall.objects.filter(call_id=owner)))
        .exclude(Exists(Compensation.objects.filter(key=owner)))
        .order_by()
    )


def distinct_values_sql(model: type[Model], column: str) -> str:
    """Every distinct value of `column`, the leading column of one of `model`'s indexes,
    at one index probe per value (a loose index scan). PostgreSQL before 18 cannot skip
    along a leading column by itself; this lets the purge use the (tool, time) indexes
    the breaker and the metrics already pay for, instead of a time index of its own on
    the busiest table."""
    table = connection.ops.quote_name(model._meta.db_table)
    field = model._meta.get_field(column)
    # A field of the model's own table (a foreign key's is its `_id` column), never a
    # relation from another table, which has no column here.
    if not isinstance(field, Field) or field.column is None:
        raise ValueError(f"{model._meta.label}.{column} is not a column of its table")
    col = connection.ops.quote_name(field.column)
    return (
        f"WITH RECURSIVE v(x) AS (SELECT min({col}) FROM {table} UNION ALL "
        f"SELECT (SELECT min({col}) FROM {table} WHERE {col} > v.x) FROM v "
        "WHERE v.x IS NOT NULL) SELECT x FROM v WHERE x IS NOT NULL"
    )


def distinct_values(model: type[Model], column: str) -> list[Any]:
    with connection.cursor() as cursor:
        cursor.execute(distinct_values_sql(model, column))
        return [row[0] for row in cursor.fetchall()]


class _Purge:
    """One run of the purge: its cutoff, batch sizes, deadline and counts."""

    def __init__(self, *, days: float, batch: int, runs_per_batch: int, max_seconds: float):
        self.cutoff = timezone.now() - timedelta(days=days)
        self.batch = batch
        self.runs_per_batch = runs_per_batch
        self.deadline = time.monotonic() + max_seconds
        self.counts: Counter[str] = Counter(dict.fromkeys(KINDS, 0))

    def time_left(self) -> bool:
        return time.monotonic() < self.deadline

    def drain(self, rows: QuerySet[Any], *, recheck: Q | None = None) -> None:
        """Delete what `rows` finds, `batch` primary keys per DELETE (the select is its
        subquery: one statement, one short transaction), until a batch comes back short.
        `recheck`: conditions the DELETE itself tests again on each row it locks, so that
        a row changed since the select was planned is left alone."""
        model = rows.model
        label = model._meta.label
        while self.time_left():
            batch = model._default_manager.filter(pk__in=rows.values("pk")[: self.batch])
            _, per_model = batch.filter(recheck or Q()).delete()
            deleted = per_model.get(label, 0)
            self.counts.update(per_model)
            if deleted < self.batch:
                return

    def runs(self) -> None:
        """Delete ended runs past retention with everything under them, a few at a time."""
        candidates = runs_past_retention(cutoff=self.cutoff)
        while self.time_left():
            with transaction.atomic():
                # Locked, and the conditions read again under the lock: the saga and the
                # desk lock a run's row before they reopen it (a late undo, a retried
                # ticket), so a run one of them is changing now is skipped, never deleted
                # under it. SKIP LOCKED: a second purge running at once takes other runs.
                locked = candidates.select_for_update(skip_locked=True)
                pks = list(locked.values_list("pk", flat=True)[: self.runs_per_batch])
                if not pks:
                    return
                # Django's cascade, so that whatever hangs off a run now or later goes
                # with it; only("pk"): the run rows are not read for nothing.
                _, per_model = Run.objects.filter(pk__in=pks).only("pk").delete()
            self.counts.update(per_model)
            if len(pks) < self.runs_per_batch:
                return

    def result(self) -> dict[str, int]:
        return {kind: n for kind, n in self.counts.items() if n or kind in KINDS}


def retention_purge(
    *,
    days: float,
    batch: int = BATCH,
    runs_per_batch: int = RUNS_PER_BATCH,
    max_seconds: float = MAX_SECONDS,
) -> dict[str, int]:
    """Delete everything past retention (see the module's docstring); the number of rows
    deleted per model label, cascades included. Safe to run twice, even at once: every
    batch deletes only what is still there."""
    purge = _Purge(days=days, batch=batch, runs_per_batch=runs_per_batch, max_seconds=max_seconds)
    cutoff = purge.cutoff
    # Expired keys first: a live key holds its run back. Then whole runs, the bulk, in
    # the fewest statements; then the old attempts of runs that stay; sealed args last,
    # once the calls that referred to them are gone.
    purge.drain(
        idempotency_records_expired(),
        recheck=Q(state=IdempotencyRecord.State.RECORDED, expires_at__lt=Now()),
    )
    purge.runs()
    for tool in distinct_values(Attempt, "tool"):
        purge.drain(attempts_past_retention(tool=tool, cutoff=cutoff))
    for tool in distinct_values(ReplayCount, "tool"):
        purge.drain(replay_counts_past_retention(tool=tool, cutoff=cutoff))
    # The DELETE tests created_at again: a writer that refreshes it on reusing a row
    # (the row was locked by that write) keeps the row.
    purge.drain(sealed_args_unreferenced(cutoff=cutoff), recheck=Q(created_at__lt=cutoff))
    # Dead rate windows, by the wall clock the web processes count them on.
    minute = int(time.time() // 60)
    for agent_id in distinct_values(RateWindow, "agent"):
        purge.drain(rate_windows_dead(agent_id=agent_id, minute=minute))
    if not purge.time_left():
        log.info("retention: out of time for this run; the next run carries on")
    return purge.result()
