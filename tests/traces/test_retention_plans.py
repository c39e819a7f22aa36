"""The retention purge's queries walk indexes, on PostgreSQL, with the planner's own
choice: tables of a realistic shape (a month of rows, a few per cent past retention, as an
hourly purge finds them at worst), analysed, and every query EXPLAINed as the purge runs it.
`pytest -s` prints the plans."""

from __future__ import annotations

import random
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.db.models import QuerySet
from django.utils import timezone

from compensations.models import Compensation
from toolops.models import Attempt, IdempotencyRecord, Run, ToolCall, new_trace_id
from traces import retention
from traces.models import ReplayCount, SealedArgs

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(connection.vendor != "postgresql", reason="the plans are PostgreSQL's"),
]

RUNS, CALLS_PER_RUN, ATTEMPTS_PER_CALL = 5000, 4, 3
TOOLS = [f"tool-{n}" for n in range(8)]
# Against 30 days' retention: about two hours' rows past it, as an hourly purge finds the
# tables at worst (a run missed). A first purge of a long backlog may plan otherwise (a
# hash of the compensations, say): cheaper then, by the planner's own sums.
SPAN_DAYS = 30.1
BATCH = retention.BATCH


def index_name(model: type[Any], fields: list[str]) -> str:
    return next(i.name for i in model._meta.indexes if i.fields == fields)


def some_time(rng: random.Random) -> Any:
    return timezone.now() - timedelta(days=rng.uniform(0, SPAN_DAYS))


def fill(agent: Any) -> None:
    rng = random.Random(8)
    runs = []
    for n in range(RUNS):
        created = some_time(rng)
        ended = created + timedelta(minutes=5) if rng.random() < 0.9 else None
        runs.append(
            Run(
                agent=agent,
                run_id=f"r{n}",
                trace_id=new_trace_id(),
                created_at=created,
                status=Run.Status.COMPLETED if ended else Run.Status.RUNNING,
                ended_at=ended,
            )
        )
    runs = Run.objects.bulk_create(runs, batch_size=2000)
    calls = [
        ToolCall(
            call_id=f"c{run.pk}-{s}",
            run=run,
            tool_call_id=f"t{s}",
            step_index=s,
            tool=rng.choice(TOOLS),
            args_digest=f"{rng.getrandbits(256):064x}",
            status=ToolCall.Status.SUCCEEDED,
            created_at=run.created_at,
        )
        for run in runs
        for s in range(CALLS_PER_RUN)
    ]
    calls = ToolCall.objects.bulk_create(calls, batch_size=2000)
    Attempt.objects.bulk_create(
        [
            Attempt(
                call=c,
                tool=c.tool,
                number=a,
                span_id=f"{n:016x}",
                started_at=c.created_at,
                duration_ms=1.0,
                outcome="ok",
            )
            for n, c in enumerate(calls)
            for a in range(1, ATTEMPTS_PER_CALL + 1)
        ],
        batch_size=5000,
    )
    Compensation.objects.bulk_create(
        [
            Compensation(
                run_id=c.run_id,
                call=c,
                tool="undo",
                key=f"{rng.getrandbits(256):064x}",
                status=Compensation.Status.DISCARDED,
            )
            for c in calls[::2]
        ],
        batch_size=2000,
    )
    # Records live 7 days, and the purge has kept up: a few are past their expiry.
    IdempotencyRecord.objects.bulk_create(
        [
            IdempotencyRecord(
                key=c.call_id,
                call_ref=c.call_id,
                tool=c.tool,
                state="recorded",
                lease_until=c.created_at,
                created_at=c.created_at,
                expires_at=c.created_at + timedelta(days=7),
            )
            for c in calls
            if c.created_at > timezone.now() - timedelta(days=7.25)
        ],
        batch_size=5000,
    )
    SealedArgs.objects.bulk_create(
        [SealedArgs(digest=c.call_id, token="x", created_at=c.created_at) for c in calls[::4]],
        batch_size=5000,
    )
    start = timezone.now() - timedelta(days=SPAN_DAYS)
    ReplayCount.objects.bulk_create(
        [
            ReplayCount(tool=tool, minute=start + timedelta(minutes=20 * m), count=1)
            for tool in TOOLS
            for m in range(int(SPAN_DAYS * 72))
        ],
        batch_size=5000,
    )
    with connection.cursor() as cursor:
        for model in (
            Run,
            ToolCall,
            Attempt,
            Compensation,
            IdempotencyRecord,
            SealedArgs,
            ReplayCount,
        ):
            cursor.execute(f"ANALYZE {model._meta.db_table}")


def plan(query: QuerySet[Any] | str) -> str:
    if isinstance(query, str):
        # VERBOSE shows the recursive term's subplan too; the walk only reads.
        with connection.cursor() as cursor:
            cursor.execute(f"EXPLAIN (ANALYZE, VERBOSE) {query}")
            text = "\n".join(row[0] for row in cursor.fetchall())
    else:
        text = query.explain()
    print(f"\n{text}")  # shown with -s, for the record
    return text


def test_the_purge_queries_walk_indexes(agent_a: Any) -> None:
    fill(agent_a[0])
    cutoff = timezone.now() - timedelta(days=30)
    attempt_index = index_name(Attempt, ["tool", "started_at"])

    runs = plan(
        retention.runs_past_retention(cutoff=cutoff).values("pk")[: retention.RUNS_PER_BATCH]
    )
    assert "run_ended_at" in runs
    tools = plan(retention.distinct_values_sql(Attempt, "tool"))
    # Both the first value and each next one: one index probe apiece.
    assert tools.count(f"using {attempt_index}") == 2
    assert "Seq Scan" not in tools
    attempts = plan(
        retention.attempts_past_retention(tool=TOOLS[0], cutoff=cutoff).values("pk")[:BATCH]
    )
    assert attempt_index in attempts
    replays = plan(
        retention.replay_counts_past_retention(tool=TOOLS[0], cutoff=cutoff).values("pk")[:BATCH]
    )
    assert "replay_tool_minute" in replays
    records = plan(retention.idempotency_records_expired().values("pk")[:BATCH])
    assert index_name(IdempotencyRecord, ["expires_at"]) in records
    sealed = plan(retention.sealed_args_unreferenced(cutoff=cutoff).values("pk")[:BATCH])
    assert "sealed_args_created" in sealed
    assert "call_call_id_unique" in sealed and "compensation_key" in sealed
