"""The console's queries read indexes, not the call table, on PostgreSQL: tables of a
realistic shape, analysed, and every query EXPLAINed as the page runs it. The search by
idempotency key (migration traces 0007) and the runs list read all 10 million calls of
bench/flat.py's big database before. `pytest -s` prints the plans."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from django.db import connection
from django.test import Client

from toolops.models import Run, ToolCall, new_trace_id
from traces.console.search import run_search

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(connection.vendor != "postgresql", reason="the plans are PostgreSQL's"),
]

RUNS, CALLS_PER_RUN = 1000, 20


def key(n: int) -> str:
    return hashlib.sha256(str(n).encode()).hexdigest()


def fill(agent: Any) -> None:
    runs = Run.objects.bulk_create(
        [Run(agent=agent, run_id=f"r{n}", trace_id=new_trace_id()) for n in range(RUNS)],
        batch_size=1000,
    )
    calls = [
        # Every 10th call was refused before it had a key.
        ToolCall(
            call_id=f"c{run.pk}-{s}",
            run=run,
            tool_call_id=f"t{s}",
            step_index=s,
            tool="create_order",
            idempotency_key="" if s % 10 == 9 else key(run.pk * 100 + s),
            status=ToolCall.Status.SUCCEEDED,
        )
        for run in runs
        for s in range(CALLS_PER_RUN)
    ]
    ToolCall.objects.bulk_create(calls, batch_size=2000)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE toolops_run")
        cursor.execute("ANALYZE toolops_toolcall")
        # A table of 20,000 calls is small enough that a sequential scan is sometimes the
        # cheaper plan (a page's 1,000 calls are 5% of it), which it never is at millions
        # of rows. With sequential scans priced out, one still shows only where no index
        # can serve the query: what these tests are about. (For this test's transaction.)
        cursor.execute("SET LOCAL enable_seqscan = off")


class Explainer:
    def __init__(self) -> None:
        self.plans: list[str] = []

    def __call__(self, execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        if "toolops_toolcall" in sql and sql.lstrip().upper().startswith("SELECT"):
            raw = context["cursor"].cursor
            raw.execute("EXPLAIN " + sql, params, prepare=False)
            self.plans.append("\n".join(row[0] for row in raw.fetchall()))
            print(f"\n{self.plans[-1]}")  # shown with -s, for the record
        return execute(sql, params, many, context)


def test_the_search_by_idempotency_key_reads_an_index_not_the_call_table(agent_a: Any) -> None:
    fill(agent_a[0])
    run = Run.objects.get(run_id="r500")
    wanted = key(run.pk * 100 + 3)
    explainer = Explainer()

    with connection.execute_wrapper(explainer):
        results = run_search(wanted)

    one = results.single()
    assert one is not None and one.run.pk == run.pk and one.call is not None
    assert one.call.call_id == f"c{run.pk}-3"
    assert explainer.plans, "the search ran no query on the call table"
    for text in explainer.plans:
        assert "Seq Scan on toolops_toolcall" not in text
    assert any("call_idempotency_key_hash" in text for text in explainer.plans)


def test_the_runs_list_reads_the_calls_of_its_page_only(
    agent_a: Any, reviewer_client: Client
) -> None:
    fill(agent_a[0])
    explainer = Explainer()

    with connection.execute_wrapper(explainer):
        response = reviewer_client.get("/console/runs/")

    assert response.status_code == 200
    page = response.context["page"]
    assert page.paginator.count == RUNS
    # Every run of the page shows its count of calls (each has CALLS_PER_RUN).
    assert [run.calls_count for run in page] == [CALLS_PER_RUN] * len(page)
    assert explainer.plans, "the runs list ran no query on the call table"
    for text in explainer.plans:
        assert "Seq Scan on toolops_toolcall" not in text


def test_connections_run_without_jit() -> None:
    # PostgreSQL's JIT compiled the approvals queue's query for 730 ms at 10 million calls
    # (bench/flat.py), for a run of under 1 ms: every connection turns it off.
    with connection.cursor() as cursor:
        cursor.execute("SHOW jit")
        assert cursor.fetchone()[0] == "off"


@pytest.mark.parametrize("how", ["run_id prefix", "idempotency key", "call_id"])
def test_the_runs_filter_reads_indexes_not_the_call_table(
    agent_a: Any, reviewer_client: Client, how: str
) -> None:
    # The filter matches the start of run ids, trace ids and tool_call_ids, and call ids and
    # keys whole: at 10 million calls a prefix on the call table's plain index (in the
    # database's collation) read all of them, past the statement timeout.
    fill(agent_a[0])
    run = Run.objects.get(run_id="r500")
    q, expected = {
        "run_id prefix": ("r50", {"r50", *(f"r50{n}" for n in range(10))}),
        "idempotency key": (key(run.pk * 100 + 3), {"r500"}),
        "call_id": (f"c{run.pk}-3", {"r500"}),
    }[how]
    explainer = Explainer()

    with connection.execute_wrapper(explainer):
        response = reviewer_client.get("/console/runs/", {"q": q})

    assert response.status_code == 200
    assert {r.run_id for r in response.context["page"]} == expected
    assert explainer.plans, "the filter ran no query on the call table"
    for text in explainer.plans:
        assert "Seq Scan on toolops_toolcall" not in text


def seq_scans() -> int:
    """Sequential scans of the run and call tables in this transaction so far."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT coalesce(sum(seq_scan), 0) FROM pg_stat_xact_user_tables"
            " WHERE relname IN ('toolops_run', 'toolops_toolcall')"
        )
        return int(cursor.fetchone()[0])


def test_the_runs_filter_is_planned_for_its_values_once_its_statements_are_prepared(
    agent_a: Any, reviewer_client: Client
) -> None:
    # psycopg prepares a statement after its 5th run on a connection; a prepared statement
    # may then run on a generic plan, made without the values, on which `run_id LIKE $1`
    # can use no B-tree: it read every run. Here PostgreSQL is told to prefer generic
    # plans (as it does when it judges them cheap enough); the filter must not. (The
    # search page is planned the same way, @custom_plans; a generic plan there can use the
    # trigram index, so no scan shows it: bench/flat.py measures it, 58 ms → 14 ms.)
    fill(agent_a[0])
    run = Run.objects.get(run_id="r500")
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL plan_cache_mode = force_generic_plan")
    before = seq_scans()

    for _ in range(8):
        response = reviewer_client.get("/console/runs/", {"q": f"c{run.pk}-3"})
        assert [r.run_id for r in response.context["page"]] == ["r500"]

    assert seq_scans() == before
