"""`/metrics`: Prometheus text computed from the tables at scrape time, behind an optional
bearer token; each metric's value for rows set up directly; replays counted in one
statement."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.db.models import Sum
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from prometheus_client import CONTENT_TYPE_LATEST
from rest_framework.test import APIClient

from compensations.models import Compensation, Ticket
from tests.conftest import Shop
from tests.traces.conftest import Catalog
from tests.traces.metrics_scenario import EXPECTED, amplification, hit_rate, run_scenario, samples
from toolops.models import Agent, Approval, CircuitBreaker, Run, ToolCall
from toolops.tools import registry
from traces.console.figures import tool_figures
from traces.labels import UNKNOWN
from traces.metrics import DURATION_BUCKETS, REPLAY_SHARDS, replay_noted
from traces.models import ReplayCount

pytestmark = pytest.mark.django_db


def scrape(client: Client | None = None, **headers: str) -> Any:
    return (client or Client()).get("/metrics", headers=headers)


def scraped() -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    response = scrape()
    assert response.status_code == 200
    return samples(response.content.decode())


def api_post(api: APIClient) -> Any:
    def post(path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        response = api.post(path, body, format="json")
        return response.status_code, response.json()

    return post


def make_run(agent: Agent, run_id: str = "r-rows") -> Run:
    return Run.objects.create(agent=agent, run_id=run_id, trace_id=uuid.uuid4().hex)


def make_call(run: Run, tool: str, status: str, **fields: Any) -> ToolCall:
    fields.setdefault("call_id", f"c-{uuid.uuid4().hex}")
    fields.setdefault("tool_call_id", f"tc-{uuid.uuid4().hex[:12]}")
    return ToolCall.objects.create(
        run=run, step_index=0, tool=tool, status=status, args_digest="x", **fields
    )


# -- the scripted scenario ----------------------------------------------------------------


def test_it_counts_a_scenarios_retries_and_replays_exactly(api: APIClient, shop: Shop) -> None:
    run_scenario(api_post(api), shop)

    found = scraped()

    for key, value in EXPECTED.items():
        assert found.get(key) == value, key
    # Nothing beyond them: no failed calls, no other outcome.
    calls = {k: v for k, v in found.items() if k[0] == "toolops_tool_calls_total"}
    assert set(calls) <= set(EXPECTED)
    attempts = {k: v for k, v in found.items() if k[0] == "toolops_tool_attempts_total"}
    assert set(attempts) <= set(EXPECTED)
    # docs/metrics.md's formulas on these totals give the exact figures.
    assert amplification(found, "query_stock") == 5 / 3
    assert hit_rate(found, "query_stock") == 2 / 5
    assert amplification(found, "reserve_stock") == 1.0
    assert hit_rate(found, "reserve_stock") == 1 / 2


def test_it_answers_in_prometheus_text_with_its_content_type(api: APIClient, shop: Shop) -> None:
    run_scenario(api_post(api), shop)

    response = scrape()

    assert response["Content-Type"] == CONTENT_TYPE_LATEST
    text = response.content.decode()
    assert "# TYPE toolops_tool_call_duration_seconds histogram" in text
    assert "# TYPE toolops_tool_attempts_total counter" in text


def test_it_builds_the_duration_histogram_from_the_rows(
    agent_a: tuple[Agent, str], catalog: Catalog
) -> None:
    catalog("slow_tool")
    run = make_run(agent_a[0])
    now = timezone.now()
    for seconds in (0.02, 0.3, 0.3, 7.0):
        created = now - timedelta(seconds=seconds)
        make_call(run, "slow_tool", "succeeded", created_at=created, finished_at=now)
    make_call(run, "slow_tool", "in_progress")  # no outcome yet: not counted

    found = scraped()

    def bucket(le: float | str) -> float:
        labels = (("le", str(le)), ("tool", "slow_tool"))
        return found[("toolops_tool_call_duration_seconds_bucket", labels)]

    assert bucket(0.025) == 1
    assert bucket(0.25) == 1
    assert bucket(0.5) == 3
    assert bucket(5.0) == 3
    assert bucket(10.0) == 4
    assert bucket("+Inf") == 4
    assert found[("toolops_tool_call_duration_seconds_count", (("tool", "slow_tool"),))] == 4
    total = found[("toolops_tool_call_duration_seconds_sum", (("tool", "slow_tool"),))]
    assert total == pytest.approx(7.62)
    assert len(DURATION_BUCKETS) + 1 == sum(
        1 for name, labels in found if name.endswith("_bucket") and ("tool", "slow_tool") in labels
    )
    calls = ("toolops_tool_calls_total", (("status", "succeeded"), ("tool", "slow_tool")))
    assert found[calls] == 4


def test_it_leaves_reconcile_looks_out_of_the_attempts(
    agent_a: tuple[Agent, str], catalog: Catalog
) -> None:
    from toolops.models import Attempt

    catalog()
    call = make_call(
        make_run(agent_a[0]), "create_order", "succeeded", attempts=1, finished_at=timezone.now()
    )
    common = {"call": call, "span_id": "0" * 16, "started_at": timezone.now(), "duration_ms": 1}
    Attempt.objects.create(tool="create_order", number=1, outcome="unknown", **common)
    Attempt.objects.create(number=1, outcome="ok", purpose="reconcile", **common)

    found = scraped()

    attempts = {k: v for k, v in found.items() if k[0] == "toolops_tool_attempts_total"}
    assert attempts == {
        ("toolops_tool_attempts_total", (("outcome", "unknown"), ("tool", "create_order"))): 1
    }


# -- gauges, from rows set up directly -----------------------------------------------------


def test_it_reports_unknown_outcomes_of_agents_calls_only(
    agent_a: tuple[Agent, str], catalog: Catalog
) -> None:
    catalog()
    run = make_run(agent_a[0])
    make_call(run, "charge", "unknown")
    make_call(run, "charge", "unknown")
    make_call(run, "charge", "succeeded")
    make_call(run, "refund", "unknown", role=ToolCall.Role.UNDO)

    found = scraped()

    assert found[("toolops_unknown_calls", (("tool", "charge"),))] == 2
    # The undo call is the compensations' business: refund's series (a catalog tool) is 0.
    assert found[("toolops_unknown_calls", (("tool", "refund"),))] == 0


def test_it_reports_each_breakers_state_as_admission_sees_it(catalog: Catalog) -> None:
    now = timezone.now()
    past, future = now - timedelta(seconds=5), now + timedelta(minutes=5)
    rows = {
        "closed_tool": {"state": "closed"},
        "open_tool": {"state": "open", "open_until": future},
        # The cool-down has passed: the next call is the probe.
        "cooled_tool": {"state": "open", "open_until": past},
        "probing_tool": {"state": "half_open", "probe_until": future},
        # An operator's hold that ran out: the next call closes it.
        "held_tool": {"state": "open", "forced": True, "open_until": past},
        "holding_tool": {"state": "open", "forced": True, "open_until": future},
    }
    for tool, fields in rows.items():
        CircuitBreaker.objects.create(tool=tool, **fields)
    catalog(*rows)

    found = scraped()

    levels = {tool: found[("toolops_breaker_state", (("tool", tool),))] for tool in rows}
    assert levels == {
        "closed_tool": 0,
        "open_tool": 2,
        "cooled_tool": 1,
        "probing_tool": 1,
        "held_tool": 0,
        "holding_tool": 2,
    }


def test_it_reports_every_catalog_tool_even_before_its_first_call(shop: Shop) -> None:
    found = scraped()

    assert found[("toolops_breaker_state", (("tool", "query_stock"),))] == 0
    assert found[("toolops_unknown_calls", (("tool", "charge"),))] == 0


def test_it_counts_open_dead_letters(agent_a: tuple[Agent, str]) -> None:
    run = make_run(agent_a[0])
    for status in ("open", "open", "closed"):
        call = make_call(run, "reserve_stock", "succeeded")
        compensation = Compensation.objects.create(
            run=run, call=call, tool="release_stock", key=uuid.uuid4().hex, status="dead_lettered"
        )
        Ticket.objects.create(
            compensation=compensation,
            run=run,
            tool="release_stock",
            status=status,
            reason=Ticket.Reason.DEAD_LETTERED,
        )

    assert scraped()[("toolops_dead_letters_open", ())] == 2


def test_it_reports_pending_approvals_and_the_wait_of_ended_ones(
    agent_a: tuple[Agent, str],
) -> None:
    run = make_run(agent_a[0])
    now = timezone.now()
    common = {
        "run": run,
        "tool": "charge",
        "reason": "irreversible",
        "args_hash": "x",
        "expires_at": now + timedelta(hours=1),
    }
    Approval.objects.create(status="pending", **common)
    Approval.objects.create(
        status="approved", created_at=now - timedelta(seconds=20), decided_at=now, **common
    )
    Approval.objects.create(
        status="expired", created_at=now - timedelta(seconds=100), decided_at=now, **common
    )

    found = scraped()

    assert found[("toolops_approvals_pending", ())] == 1
    assert found[("toolops_approval_wait_seconds_count", ())] == 2
    assert found[("toolops_approval_wait_seconds_sum", ())] == pytest.approx(120)
    assert found[("toolops_approval_wait_seconds_bucket", (("le", "10.0"),))] == 0
    assert found[("toolops_approval_wait_seconds_bucket", (("le", "30.0"),))] == 1
    assert found[("toolops_approval_wait_seconds_bucket", (("le", "300.0"),))] == 2
    assert found[("toolops_approval_wait_seconds_bucket", (("le", "+Inf"),))] == 2


def test_it_answers_with_a_fixed_number_of_queries_however_many_tools(
    agent_a: tuple[Agent, str], catalog: Catalog
) -> None:
    def queries() -> int:
        with CaptureQueriesContext(connection) as ctx:
            assert scrape().status_code == 200
        return len(ctx.captured_queries)

    catalog(*(f"tool_{n}" for n in range(8)))
    run = make_run(agent_a[0])
    make_call(run, "tool_0", "succeeded", finished_at=timezone.now(), attempts=1)
    few = queries()
    for n in range(1, 8):
        make_call(run, f"tool_{n}", "unknown", finished_at=timezone.now(), attempts=1)
        replay_noted(tool=f"tool_{n}")
        make_call(run, f"made_up_{n}", "failed", finished_at=timezone.now())

    assert queries() == few == 10
    assert tool_labels(scraped()) == {*registry.load(), UNKNOWN}


# -- names the catalog lacks ---------------------------------------------------------------


def tool_labels(found: dict[tuple[str, tuple[tuple[str, str], ...]], float]) -> set[str]:
    return {value for _, labels in found for key, value in labels if key == "tool"}


def test_it_counts_calls_to_unknown_tools_under_one_label(api: APIClient, shop: Shop) -> None:
    post = api_post(api)
    post("/api/v1/runs", {"run_id": "r-1"})
    calls = "/api/v1/runs/r-1/calls"
    for step, tool in enumerate(["create_ordr", "lookup_weather", "ann-example-com"]):
        body = {"step_index": step, "tool": tool, "args": {}, "tool_call_id": f"tc-{step}"}
        status, call = post(calls, body)
        assert (status, call["error"]["reason"]) == (200, "unknown_tool"), call
    status, call = post(
        calls, {"step_index": 0, "tool": "create_ordr", "args": {}, "tool_call_id": "tc-0"}
    )
    assert (status, call["replayed"]) == (200, True), call
    # Not a name a tool can have: refused, so in no row and no metric.
    status, _ = post(calls, {"step_index": 9, "tool": "ann@example.com", "args": {}})
    assert status == 400

    text = scrape().content.decode()

    found = samples(text)
    unknown = (("tool", UNKNOWN),)
    assert found[("toolops_tool_calls_total", (("status", "failed"), *unknown))] == 3
    assert found[("toolops_tool_calls_sent_total", unknown)] == 0
    assert found[("toolops_tool_call_duration_seconds_count", unknown)] == 3
    assert found[("toolops_idempotency_replays_total", unknown)] == 1
    assert 'toolops_tool_calls_total{status="failed",tool="(unknown)"} 3.0' in text
    for name in ("create_ordr", "lookup_weather", "ann-example-com", "ann@example.com"):
        assert name not in text
    assert ReplayCount.objects.get().tool == UNKNOWN
    assert tool_labels(found) <= {*registry.load(), UNKNOWN}


def test_it_labels_every_row_the_catalog_does_not_name_unknown(
    agent_a: tuple[Agent, str], catalog: Catalog
) -> None:
    """Rows written before names were checked, and rows of a tool since removed."""
    from toolops.models import Attempt

    catalog()
    run = make_run(agent_a[0])
    now = timezone.now()
    for n in range(20):
        make_call(run, f"made_up_{n}@example.com", "failed", finished_at=now)
    removed = make_call(run, "old_tool", "unknown", attempts=1, finished_at=now)
    Attempt.objects.create(
        call=removed,
        tool="old_tool",
        number=1,
        outcome="unknown",
        span_id="0" * 16,
        started_at=now,
        duration_ms=1,
    )
    ReplayCount.objects.create(
        tool="old_tool", minute=now.replace(second=0, microsecond=0), count=2
    )
    CircuitBreaker.objects.create(tool="old_tool", state="open", open_until=now + timedelta(1))
    make_call(run, "charge", "succeeded", finished_at=now)

    text = scrape().content.decode()

    found = samples(text)
    unknown = (("tool", UNKNOWN),)
    assert found[("toolops_tool_calls_total", (("status", "failed"), *unknown))] == 20
    assert found[("toolops_tool_calls_total", (("status", "unknown"), *unknown))] == 1
    assert found[("toolops_tool_calls_sent_total", unknown)] == 1
    assert found[("toolops_tool_call_duration_seconds_count", unknown)] == 21
    assert found[("toolops_tool_attempts_total", (("outcome", "unknown"), *unknown))] == 1
    assert found[("toolops_idempotency_replays_total", unknown)] == 2
    assert found[("toolops_unknown_calls", unknown)] == 1
    # A removed tool's breaker guards nothing; (unknown) has no breaker.
    assert ("toolops_breaker_state", unknown) not in found
    assert "old_tool" not in text and "example.com" not in text
    assert found[("toolops_tool_calls_total", (("status", "succeeded"), ("tool", "charge")))] == 1
    # The label set is the catalog's names plus one, whatever the rows hold.
    assert tool_labels(found) == {*registry.load(), UNKNOWN}
    durations = [k for k in found if k[0] == "toolops_tool_call_duration_seconds_count"]
    assert len(durations) == 2  # charge and (unknown)


def test_it_counts_every_call_under_unknown_while_the_catalog_cannot_load(
    agent_a: tuple[Agent, str], settings: Any, tmp_path: Any
) -> None:
    bad = tmp_path / "catalog.toml"
    bad.write_text('[[tool]]\nname = "not a name"\n')
    settings.TOOLOPS_TOOLS_FILE = str(bad)
    registry.reset()
    try:
        make_call(make_run(agent_a[0]), "charge", "succeeded", finished_at=timezone.now())

        found = scraped()
        figures = tool_figures()  # the page's figures, likewise
    finally:
        registry.reset()

    assert found[("toolops_tool_calls_total", (("status", "succeeded"), ("tool", UNKNOWN)))] == 1
    assert tool_labels(found) == {UNKNOWN}
    assert [(f.tool, f.window("hour").succeeded) for f in figures] == [(UNKNOWN, 1)]


# -- replays -------------------------------------------------------------------------------


def test_it_counts_a_replay_in_one_upsert_per_tool_and_minute(catalog: Catalog) -> None:
    catalog()
    with CaptureQueriesContext(connection) as ctx:
        replay_noted(tool="query_stock")
    replay_noted(tool="query_stock")
    replay_noted(tool="reserve_stock")

    assert len(ctx.captured_queries) == 1
    assert "ON CONFLICT" in ctx.captured_queries[0]["sql"]
    rows = dict(
        ReplayCount.objects.values("tool").annotate(n=Sum("count")).values_list("tool", "n")
    )
    assert rows == {"query_stock": 2, "reserve_stock": 1}
    [minute] = set(ReplayCount.objects.values_list("minute", flat=True))
    assert (minute.second, minute.microsecond) == (0, 0)


def test_concurrent_replays_of_one_tool_spread_over_rows_and_sum_exactly(
    catalog: Catalog,
) -> None:
    catalog()
    for _ in range(200):
        replay_noted(tool="query_stock")

    shards = ReplayCount.objects.filter(tool="query_stock")
    assert shards.aggregate(n=Sum("count"))["n"] == 200
    assert 1 < shards.count() <= REPLAY_SHARDS  # not one hot row every replay waits on
    found = scraped()
    assert found[("toolops_idempotency_replays_total", (("tool", "query_stock"),))] == 200


def test_a_replay_costs_the_api_one_statement_more(api: APIClient, shop: Shop) -> None:
    """The replay path is benchmarked: counting it adds exactly the upsert."""
    api.post("/api/v1/runs", {"run_id": "r-1"}, format="json")
    body = {"step_index": 0, "tool": "reserve_stock", "args": {"sku": "A12", "qty": 1}}
    assert api.post("/api/v1/runs/r-1/calls", body, format="json").json()["replayed"] is False

    with CaptureQueriesContext(connection) as ctx:
        again = api.post("/api/v1/runs/r-1/calls", body, format="json").json()

    assert again["replayed"] is True
    upserts = [q for q in ctx.captured_queries if "traces_replaycount" in q["sql"]]
    assert len(upserts) == 1
    assert ReplayCount.objects.get().count == 1


def test_a_new_call_counts_no_replay(api: APIClient, shop: Shop) -> None:
    api.post("/api/v1/runs", {"run_id": "r-1"}, format="json")
    body = {"step_index": 0, "tool": "query_stock", "args": {"sku": "A12"}}
    api.post("/api/v1/runs/r-1/calls", body, format="json")
    # A read without a tool_call_id is not claimed: sent again, it is a new call.
    api.post("/api/v1/runs/r-1/calls", body, format="json")

    assert not ReplayCount.objects.exists()
    found = scraped()
    succeeded = (("status", "succeeded"), ("tool", "query_stock"))
    assert found[("toolops_tool_calls_total", succeeded)] == 2


# -- the token -----------------------------------------------------------------------------


def test_it_is_open_without_a_token(settings: Any) -> None:
    settings.TOOLOPS_METRICS_TOKEN = ""

    assert scrape().status_code == 200


@pytest.mark.parametrize(
    "header",
    [
        None,
        "Bearer wrong-token",
        "Bearer s3cret-metrics-tokeX",
        "Basic czNjcmV0",
        "s3cret-metrics-token",
    ],
)
def test_it_refuses_a_missing_or_wrong_token(settings: Any, header: str | None) -> None:
    settings.TOOLOPS_METRICS_TOKEN = "s3cret-metrics-token"

    response = scrape(**({"Authorization": header} if header else {}))

    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer ")
    assert b"toolops_" not in response.content


def test_it_answers_with_the_token(settings: Any) -> None:
    settings.TOOLOPS_METRICS_TOKEN = "s3cret-metrics-token"

    response = scrape(Authorization="Bearer s3cret-metrics-token")

    assert response.status_code == 200
    assert b"toolops_dead_letters_open" in response.content


def test_it_needs_no_console_login_and_takes_only_get(settings: Any) -> None:
    settings.TOOLOPS_METRICS_TOKEN = ""

    assert scrape().status_code == 200  # anonymous, no redirect to the login page
    assert Client().post("/metrics").status_code == 405
