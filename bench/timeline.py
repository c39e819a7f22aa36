"""How long the server takes to render a long run's page (the target: under 300 ms for a
run of 1,000 calls).

`python bench/timeline.py` makes a run of 1,000 calls (every 10th retried twice, so three
attempts; the run stopped at the 700th, and each call before it registered a compensation)
in the database DATABASE_URL names, renders its page several times through Django's test
client as a superuser — the whole stack but the socket: middleware, view, queries,
template — and prints the median, with the live region's refresh (also of page 7, whose
calls all have compensations) and the number of queries. The run, its calls and the
bench's agent and user are deleted afterwards. `timeline_render()` returns the same
figures as a dict.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

NAME = "bench-timeline"


def _setup() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "toolops.settings")
    import django

    django.setup()


def make_run(*, calls: int, stop_at: int | None, compensations: int = 0) -> Any:
    """A run of `calls` calls, one every 100 ms; every 10th with three attempts (two
    retried, with backoff); from `stop_at` on, that call failed and the later ones were
    skipped. The first `compensations` calls each registered a compensation. Bulk
    inserts: a few statements whatever the size."""
    from django.utils import timezone

    from bench.procs import AGENT_RATE_LIMIT
    from compensations.models import Compensation
    from toolops.models import Agent, Attempt, IdempotencyRecord, Run, ToolCall
    from toolops.services import agent_create

    agent = (
        Agent.objects.filter(name=NAME).first()
        or agent_create(name=NAME, rate_limit_per_minute=AGENT_RATE_LIMIT)[0]
    )
    start = timezone.now() - timedelta(seconds=calls / 10 + 60)
    run = Run.objects.create(
        agent=agent,
        run_id=f"{NAME}-{uuid.uuid4().hex[:8]}",
        trace_id=uuid.uuid4().hex,
        status=Run.Status.RUNNING,
        created_at=start,
    )
    rows = []
    for i in range(calls):
        status = "succeeded"
        if stop_at is not None and i >= stop_at:
            status = "failed" if i == stop_at else "skipped"
        at = start + timedelta(seconds=i / 10)
        rows.append(
            ToolCall(
                run=run,
                call_id=f"c-{uuid.uuid4().hex}",
                tool_call_id=f"tc-{i}",
                step_index=i,
                tool="reserve_stock",
                status=status,
                args={"sku": f"A{i}", "qty": 1},
                result={"reservation_id": f"res-{i}"} if status == "succeeded" else None,
                args_digest=uuid.uuid4().hex,
                idempotency_key=uuid.uuid4().hex * 2,
                attempts=3 if i % 10 == 0 else 1,
                created_at=at,
                finished_at=at + timedelta(milliseconds=80),
                feedback="reserve_stock succeeded. Use its result.",
            )
        )
    ToolCall.objects.bulk_create(rows, batch_size=500)
    attempts, records = [], []
    for c in rows:
        for n in range(1, c.attempts + 1):
            attempts.append(
                Attempt(
                    call=c,
                    tool=c.tool,
                    number=n,
                    span_id=uuid.uuid4().hex[:16],
                    started_at=c.created_at + timedelta(milliseconds=25 * n),
                    duration_ms=12.0,
                    waited_ms=10.0 if n > 1 else 0.0,
                    http_status=200 if n == c.attempts else 503,
                    outcome="ok" if n == c.attempts else "retry",
                    downstream_request_id=f"req-{uuid.uuid4().hex[:12]}",
                )
            )
        records.append(
            IdempotencyRecord(
                key=c.idempotency_key,
                call_ref=c.call_id,
                tool=c.tool,
                state="recorded",
                lease_until=c.created_at,
                recorded_at=c.finished_at,
                expires_at=c.created_at + timedelta(days=7),
            )
        )
    Attempt.objects.bulk_create(attempts, batch_size=1000)
    IdempotencyRecord.objects.bulk_create(records, batch_size=1000)
    Compensation.objects.bulk_create(
        [
            Compensation(
                run=run,
                call=c,
                tool="release_stock",
                args={"reservation_id": f"res-{i}"},
                key=uuid.uuid4().hex * 2,
            )
            for i, c in enumerate(rows[:compensations])
        ],
        batch_size=1000,
    )
    return run


def timeline_render(*, calls: int = 1000, renders: int = 7) -> dict[str, Any]:
    """Median server time to render the run page of a `calls`-call run (ms), its live
    region's refresh, and the queries of one render."""
    _setup()
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from toolops.models import Agent, IdempotencyRecord
    from traces.console.timeline import PAGE_SIZE

    user_model = get_user_model()
    user, made_user = user_model.objects.get_or_create(
        username=NAME, defaults={"is_superuser": True, "is_staff": True}
    )
    had_agent = Agent.objects.filter(name=NAME).exists()
    stop_at = calls * 7 // 10
    run = make_run(calls=calls, stop_at=stop_at, compensations=stop_at)
    keys = list(run.calls.values_list("idempotency_key", flat=True))
    try:
        client = Client(SERVER_NAME="127.0.0.1")
        client.force_login(user)
        url = f"/console/runs/{run.pk}/"
        client.get(url)  # warm-up: templates compiled, catalog loaded
        page = _times(client, url, renders)
        refresh = _times(client, url, renders, HTTP_HX_REQUEST="true")
        refreshed = client.get(url, HTTP_HX_REQUEST="true")
        # The page before the stop (page 7 of 1,000 calls): every call on it has an undo.
        undone_url = f"{url}?page={stop_at // PAGE_SIZE}"
        undone = _times(client, undone_url, renders, HTTP_HX_REQUEST="true")
        undone_bytes = len(client.get(undone_url, HTTP_HX_REQUEST="true").content)
        with CaptureQueriesContext(connection) as queries:
            response = client.get(url)
        assert response.status_code == 200, response.status_code
        return {
            "calls": calls,
            "shown": response.content.count(b'<tbody id="call-'),
            "renders": renders,
            "page_ms_median": round(statistics.median(page), 1),
            "page_ms": [round(t, 1) for t in page],
            "refresh_ms_median": round(statistics.median(refresh), 1),
            "refresh_bytes": len(refreshed.content),
            "undone_refresh_ms_median": round(statistics.median(undone), 1),
            "undone_refresh_bytes": undone_bytes,
            "queries": len(queries.captured_queries),
            "bytes": len(response.content),
            "database": connection.vendor,
        }
    finally:
        run.delete()
        IdempotencyRecord.objects.filter(key__in=keys).delete()
        if made_user:
            user.delete()
        if not had_agent:
            Agent.objects.filter(name=NAME, runs__isnull=True).delete()


def _times(client: Any, url: str, count: int, **headers: str) -> list[float]:
    times = []
    for _ in range(count):
        t0 = time.perf_counter()
        response = client.get(url, **headers)
        times.append((time.perf_counter() - t0) * 1000)
        assert response.status_code == 200, response.status_code
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--renders", type=int, default=7)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    options = parser.parse_args()
    figures = timeline_render(calls=options.calls, renders=options.renders)
    if options.json:
        print(json.dumps(figures))
        return
    verdict = "PASS" if figures["page_ms_median"] < 300 else "MISS"
    print(
        f"run page, {figures['calls']} calls ({figures['shown']} shown), "
        f"{figures['database']}: median {figures['page_ms_median']} ms over "
        f"{figures['renders']} renders (min {min(figures['page_ms'])}, "
        f"max {max(figures['page_ms'])}), {figures['queries']} queries, "
        f"{figures['bytes'] // 1024} KiB  [{verdict}: target < 300 ms]"
    )
    print(
        f"live region refresh: median {figures['refresh_ms_median']} ms, "
        f"{figures['refresh_bytes'] // 1024} KiB; on a page of calls that all registered a "
        f"compensation: median {figures['undone_refresh_ms_median']} ms, "
        f"{figures['undone_refresh_bytes'] // 1024} KiB"
    )


if __name__ == "__main__":
    main()
