"""The console's Metrics page: each tool's figures over the last hour or day, the same
definitions as /metrics, highlights where a threshold is crossed, flagged tools first and
idle ones listed by name, a constant number of queries however many tools, and clear
errors for bad addresses."""

from __future__ import annotations

import re
import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.test import APIClient

from compensations.models import Compensation, Ticket
from tests.conftest import Shop
from tests.traces.conftest import Catalog
from tests.traces.metrics_scenario import run_scenario
from toolops.models import Agent, Approval, Attempt, CircuitBreaker, Run, ToolCall
from traces.console import thresholds
from traces.console.figures import (
    _call_groups,
    call_groups_python,
    percentile_cont,
    tool_figures,
    window_end,
)
from traces.console.sparkline import spark
from traces.labels import UNKNOWN
from traces.metrics import replay_noted
from traces.models import ReplayCount

pytestmark = pytest.mark.django_db
PAGE = "/console/metrics/"


@pytest.fixture
def operator(django_user_model: Any) -> Any:
    user = django_user_model.objects.create_user(username="olga", password=None)
    user.groups.add(Group.objects.get_or_create(name="operators")[0])
    return user


@pytest.fixture
def console(operator: Any) -> Client:
    client = Client()
    client.force_login(operator)
    return client


def tile(html: str, tool: str, figure: str) -> str:
    """The text of one tool's tile, tags stripped, spaces collapsed."""
    card = html.split(f'id="metrics-{tool}"', 1)[1].split("</section>", 1)[0]
    block = card.split(f'data-figure="{figure}">', 1)[1].split('<div class="sparks">', 1)[0]
    return " ".join(re.sub(r"<[^>]+>", " ", block).split())


def is_flagged(html: str, tool: str, figure: str) -> bool:
    card = html.split(f'id="metrics-{tool}"', 1)[1].split("</section>", 1)[0]
    return f'class="tile flagged" data-figure="{figure}"' in card


def make_run(agent: Agent, run_id: str = "r-rows") -> Run:
    return Run.objects.create(agent=agent, run_id=run_id, trace_id=uuid.uuid4().hex)


def make_call(run: Run, tool: str, status: str = "succeeded", **fields: Any) -> ToolCall:
    fields.setdefault("call_id", f"c-{uuid.uuid4().hex}")
    fields.setdefault("tool_call_id", f"tc-{uuid.uuid4().hex[:12]}")
    fields.setdefault("finished_at", timezone.now())
    return ToolCall.objects.create(
        run=run, step_index=0, tool=tool, status=status, args_digest="x", **fields
    )


def attempt(call: ToolCall, number: int, outcome: str = "ok", health: str = "success") -> None:
    Attempt.objects.create(
        call=call,
        tool=call.tool,
        number=number,
        span_id=uuid.uuid4().hex[:16],
        started_at=call.created_at,
        duration_ms=5,
        outcome=outcome,
        health=health,
    )


# -- the scripted scenario ----------------------------------------------------------------


def test_it_shows_a_scenarios_exact_amplification_and_hit_rate(
    api: APIClient, shop: Shop, console: Client
) -> None:
    def post(path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        response = api.post(path, body, format="json")
        return response.status_code, response.json()

    run_scenario(post, shop)

    for window in ("hour", "day"):
        html = console.get(PAGE, {"window": window}).content.decode()

        amplification = tile(html, "query_stock", "amplification")
        assert "1.67×" in amplification  # 5 / 3
        assert "5 requests / 3 calls" in amplification
        hit = tile(html, "query_stock", "hit-rate")
        assert "40.0%" in hit  # 2 / (2 + 3)
        assert "2 replays / 5 requests" in hit
        assert "100.0%" in tile(html, "query_stock", "success")
        assert "1.00×" in tile(html, "reserve_stock", "amplification")
        assert "1 replay / 2 requests" in tile(html, "reserve_stock", "hit-rate")
        # 5 / 3 is above 1.5: flagged, in words as well as by its class.
        assert is_flagged(html, "query_stock", "amplification")
        assert "Above 1.5" in tile(html, "query_stock", "amplification")
        assert not is_flagged(html, "reserve_stock", "amplification")


# -- highlights ------------------------------------------------------------------------------


def test_it_flags_a_hit_rate_rising_against_the_day(
    agent_a: tuple[Agent, str], console: Client, catalog: Catalog
) -> None:
    catalog("echo_tool", "steady_tool")
    run = make_run(agent_a[0])
    earlier = timezone.now() - timedelta(hours=3)
    for _ in range(10):  # earlier in the day: 10 calls, no replays (0%)
        make_call(run, "echo_tool", created_at=earlier, finished_at=earlier)
        make_call(run, "steady_tool", created_at=earlier, finished_at=earlier)
    for _ in range(10):  # the last hour: 10 calls and 10 replays (50%)
        make_call(run, "echo_tool")
        replay_noted(tool="echo_tool")
        make_call(run, "steady_tool")
        replay_noted(tool="steady_tool")
    # steady_tool was replayed as much before: 50% all day, not rising.
    minute = (earlier - timedelta(minutes=1)).replace(second=0, microsecond=0)
    ReplayCount.objects.create(tool="steady_tool", minute=minute, count=10)

    html = console.get(PAGE).content.decode()

    assert is_flagged(html, "echo_tool", "hit-rate")
    assert "Rising: 50.0% in the last hour against 0.0% in the 23 hours before" in tile(
        html, "echo_tool", "hit-rate"
    )
    assert not is_flagged(html, "steady_tool", "hit-rate")


def test_it_flags_an_open_breaker(console: Client, catalog: Catalog) -> None:
    catalog("flaky_tool", "calm_tool")
    CircuitBreaker.objects.create(
        tool="flaky_tool", state="open", open_until=timezone.now() + timedelta(minutes=1)
    )
    CircuitBreaker.objects.create(tool="calm_tool", state="closed")

    html = console.get(PAGE).content.decode()

    assert is_flagged(html, "flaky_tool", "breaker")
    assert "Open: calls to this tool end at once" in tile(html, "flaky_tool", "breaker")
    assert 'class="card metrics-card flagged" id="metrics-flaky_tool"' in html
    # A closed breaker and no calls: idle, so its card is on its own view only.
    assert 'id="metrics-calm_tool"' not in html
    calm = console.get(PAGE, {"tool": "calm_tool"}).content.decode()
    assert "closed" in tile(calm, "calm_tool", "breaker")
    assert not is_flagged(calm, "calm_tool", "breaker")


def test_it_shows_unknown_outcomes_dead_letters_and_approval_wait(
    agent_a: tuple[Agent, str], console: Client, catalog: Catalog
) -> None:
    catalog()
    run = make_run(agent_a[0])
    unknown = make_call(run, "charge", "unknown", attempts=1)
    attempt(unknown, 1, outcome="unknown", health="failure")
    compensation = Compensation.objects.create(
        run=run,
        call=make_call(run, "reserve_stock"),
        tool="release_stock",
        key="k",
        status="dead_lettered",
    )
    Ticket.objects.create(
        compensation=compensation, run=run, tool="release_stock", reason=Ticket.Reason.DEAD_LETTERED
    )
    now = timezone.now()
    common = {
        "run": run,
        "tool": "charge",
        "reason": "irreversible",
        "args_hash": "x",
        "expires_at": now + timedelta(hours=1),
    }
    Approval.objects.create(status="pending", **common)
    for seconds in (30, 90):
        Approval.objects.create(
            status="approved", decided_at=now, created_at=now - timedelta(seconds=seconds), **common
        )

    html = console.get(PAGE).content.decode()

    assert tile(html, "charge", "unknown").startswith(
        "Unknown outcomes 1 unknown now; 1 unknown request,"
    )
    assert "1 failed request," in tile(html, "charge", "breaker")
    dead_letters = tile(html, "release_stock", "dead-letters")
    assert "Dead letters 1 open now; 1 opened" in dead_letters
    wait = tile(html, "charge", "approval-wait")
    assert "1.0 min" in wait  # the mean of 30 s and 90 s
    assert "mean of 2 ended" in wait and "1 pending now" in wait
    totals = html.split('class="metrics-totals">')[1].split("</p>")[0]
    assert " ".join(re.sub(r"<[^>]+>", " ", totals).split()) == (
        "Dead letters open: 1 Approvals pending: 1 Tools flagged: 0"
    )


def test_it_charts_the_last_hour_and_the_last_day(
    agent_a: tuple[Agent, str], console: Client, catalog: Catalog
) -> None:
    catalog("chart_tool")
    run = make_run(agent_a[0])
    for hours_ago in (0, 5):
        at = timezone.now() - timedelta(hours=hours_ago)
        call = make_call(run, "chart_tool", created_at=at, finished_at=at, attempts=2)
        attempt(call, 1, "retry", "failure")
        attempt(call, 2)

    response = console.get(PAGE, {"tool": "chart_tool"})

    html = response.content.decode()
    card = html.split('id="metrics-chart_tool"', 1)[1]
    charts = re.findall(r'<svg class="spark"[^>]*aria-label="([^"]*)"', card)
    # Eight figures over the hour and the day; a series of fewer than two points is its
    # number, not a one-dot chart: the hour's rates (one call), the approval wait (none).
    assert len(charts) == 10
    assert "Retry amplification, last day, hourly buckets: latest 2.00×, highest 2.00×" in charts
    assert "Success rate, last day, hourly buckets: latest 100.0%, highest 100.0%" in charts
    assert "Failed requests, last hour, 5-minute buckets: latest 1, highest 1" in charts
    assert not any(label.startswith("Retry amplification, last hour") for label in charts)
    assert (
        '<span class="spark-text" title="Retry amplification, last hour, 5-minute buckets: '
        '2.00×">2.00×</span>'
    ) in card
    assert (
        '<span class="spark-text" title="Mean approval wait, last day, hourly buckets: no '
        'data">no data</span>'
    ) in card


# -- the order: flagged, active, idle ---------------------------------------------------------


def section(html: str, name: str) -> str:
    """One section of the page (flagged, active or idle), up to the next one."""
    block = html.split(f'id="tools-{name}"', 1)[1]
    return block.split('id="tools-', 1)[0].split('class="card definitions"', 1)[0]


def test_it_puts_flagged_tools_first_and_lists_idle_ones_by_name(
    agent_a: tuple[Agent, str], shop: Shop, console: Client
) -> None:
    run = make_run(agent_a[0])
    make_call(run, "charge")  # a call in the last hour
    voucher = make_call(run, "send_voucher", attempts=2)  # 2 requests for 1 call: flagged
    attempt(voucher, 1, "retry", "failure")
    attempt(voucher, 2)
    earlier = timezone.now() - timedelta(hours=3)
    make_call(run, "create_order", created_at=earlier, finished_at=earlier)  # not this hour
    CircuitBreaker.objects.create(  # its cool-down is over: half-open
        tool="reserve_stock", state="open", open_until=timezone.now() - timedelta(minutes=1)
    )
    Approval.objects.create(
        run=run,
        tool="send_notification",
        reason="policy",
        args_hash="x",
        expires_at=timezone.now() + timedelta(hours=1),
    )

    html = console.get(PAGE).content.decode()

    cards = re.findall(r'class="card metrics-card[^"]*" id="metrics-([^"]+)"', html)
    # Flagged first, though it comes last in the catalog; then the catalog's order.
    assert cards == ["send_voucher", "charge", "reserve_stock", "send_notification"]
    assert "metrics-send_voucher" in section(html, "flagged")
    assert "metrics-charge" not in section(html, "flagged")
    assert "Active in the last hour" in section(html, "active")
    # Only the active tools by default; the idle ones one link away.
    assert 'id="tools-idle"' not in html
    assert re.search(r'<a href="\?window=hour&amp;all=1">Show all \d+ tools</a>', html)
    html = console.get(PAGE, {"all": "1"}).content.decode()
    idle = section(html, "idle")
    assert "No calls in the last hour" in idle
    for tool in ("create_order", "query_stock", "search_products"):
        assert f'<a href="?tool={tool}&amp;window=hour"><code>{tool}</code></a>' in idle
    assert '<code>release_stock</code></a> <span class="muted">(internal)</span>' in idle
    for tool in cards:
        assert f"?tool={tool}&amp;" not in idle
    assert "Tools flagged: <strong" in html and 'flagged-count">1<' in html

    # Over the day, the call of three hours ago makes create_order active.
    day = console.get(PAGE, {"window": "day", "all": "1"}).content.decode()
    assert 'id="metrics-create_order"' in day
    assert "No calls in the last day" in section(day, "idle")
    assert '<a href="?tool=query_stock&amp;window=day">' in section(day, "idle")

    # An idle tool's own view still shows its full card.
    own = console.get(PAGE, {"tool": "query_stock"}).content.decode()
    assert "No calls in the last hour" in own
    assert len(re.findall(r'class="tile[^"]*" data-figure=', own)) == 8
    assert tile(own, "query_stock", "success").startswith("Success rate — 0 succeeded of 0")


def test_it_gives_names_the_catalog_lacks_one_unknown_card(
    agent_a: tuple[Agent, str], console: Client, catalog: Catalog
) -> None:
    catalog()
    run = make_run(agent_a[0])
    make_call(run, "charge")
    for name in ("create_ordr", "lookup_weather", "ann@example.com"):  # the last from before
        make_call(run, name, "failed")  # names were checked: no new row can hold one

    html = console.get(PAGE).content.decode()

    cards = re.findall(r'class="card metrics-card[^"]*" id="metrics-([^"]+)"', html)
    assert cards == ["charge", UNKNOWN]  # the catalog's tools, then (unknown), once
    for name in ("create_ordr", "lookup_weather", "ann@example.com", "example.com"):
        assert name not in html
    assert tile(html, UNKNOWN, "success").startswith("Success rate 0.0% 0 succeeded of 3")
    assert "not in catalog" in html.split(f'id="metrics-{UNKNOWN}"', 1)[1].split("</h3>")[0]
    assert not is_flagged(html, UNKNOWN, "breaker")

    assert '<a href="?tool=%28unknown%29&amp;window=hour"><code>(unknown)</code></a>' in html
    # (unknown) has a view of its own; a made-up name does not.
    own = console.get(PAGE, {"tool": UNKNOWN}).content.decode()
    assert re.findall(r'class="card metrics-card[^"]*" id="metrics-([^"]+)"', own) == [UNKNOWN]
    assert console.get(PAGE, {"tool": "create_ordr"}).status_code == 404


def test_it_has_no_unknown_card_when_every_name_is_in_the_catalog(
    agent_a: tuple[Agent, str], console: Client, catalog: Catalog
) -> None:
    catalog()
    make_call(make_run(agent_a[0]), "charge")

    html = console.get(PAGE).content.decode()

    assert f'id="metrics-{UNKNOWN}"' not in html
    assert "?tool=%28unknown%29" not in html
    assert [f.tool for f in tool_figures() if not f.in_catalog] == []


# -- the windows -----------------------------------------------------------------------------


def test_it_tells_the_hour_from_the_day(
    agent_a: tuple[Agent, str], console: Client, catalog: Catalog
) -> None:
    catalog("window_tool")
    run = make_run(agent_a[0])
    earlier = timezone.now() - timedelta(hours=2)
    make_call(run, "window_tool", "failed", created_at=earlier, finished_at=earlier)
    make_call(run, "window_tool")
    too_old = timezone.now() - timedelta(days=2)
    make_call(run, "window_tool", "failed", created_at=too_old, finished_at=too_old)

    hour = console.get(PAGE, {"window": "hour"}).content.decode()
    day = console.get(PAGE, {"window": "day", "all": "1"}).content.decode()

    assert "1 succeeded of 1 finished call, last hour" in tile(hour, "window_tool", "success")
    assert "1 succeeded of 2 finished calls, last day" in tile(day, "window_tool", "success")


def test_the_python_figures_match_postgresqls(agent_a: tuple[Agent, str], catalog: Catalog) -> None:
    """SQLite gets its call figures from Python: the same numbers, percentiles included,
    and the same (unknown) label for the names the catalog lacks."""
    catalog("pct_tool")
    run = make_run(agent_a[0])
    now = timezone.now()
    for i, (ago_min, seconds) in enumerate([(1, 0.2), (2, 1.5), (3, 0.7), (50, 3.0), (200, 9.0)]):
        finished = now - timedelta(minutes=ago_min)
        created = finished - timedelta(seconds=seconds)
        status = "succeeded" if i % 2 else "failed"
        make_call(run, "pct_tool", status, attempts=i % 3, created_at=created, finished_at=finished)
        # Each under a name of its own, none in the catalog: one (unknown) group.
        make_call(run, f"made_up_{i}", "failed", created_at=created, finished_at=finished)
    end = window_end()
    since = end - timedelta(days=1)
    tools = ["pct_tool", "query_stock"]

    in_sql = _call_groups(since, end, tools)
    in_python = call_groups_python(since, end, tools)

    assert in_sql.keys() == in_python.keys()
    for key, tally in in_sql.items():
        other = in_python[key]
        assert (tally.finished, tally.succeeded, tally.sent) == (
            other.finished,
            other.succeeded,
            other.sent,
        ), key
        assert tally.latency == pytest.approx(other.latency), key
    assert in_sql[("pct_tool", "day", None)].finished == 5
    assert in_sql[("pct_tool", "hour", None)].finished == 4
    assert in_sql[("pct_tool", "hour", None)].latency == pytest.approx((1.1, 2.775, 2.955))
    assert {tool for tool, _, _ in in_sql} == {"pct_tool", UNKNOWN}
    assert in_sql[(UNKNOWN, "hour", None)].latency == pytest.approx((1.1, 2.775, 2.955))
    assert in_sql[(UNKNOWN, "day", None)].finished == 5


def test_percentile_cont_interpolates_like_postgresql() -> None:
    assert percentile_cont([1.0], 0.99) == 1.0
    assert percentile_cont([1.0, 2.0], 0.5) == 1.5
    assert percentile_cont([1.0, 2.0, 3.0, 4.0, 5.0], 0.95) == pytest.approx(4.8)


# -- the thresholds and charts -----------------------------------------------------------


def test_the_hit_rate_rule() -> None:
    rising = thresholds.hit_rate_rising
    assert rising(hour_requests=20, hour_rate=0.5, before=0.0)
    assert rising(hour_requests=20, hour_rate=0.5, before=None)
    assert rising(hour_requests=20, hour_rate=0.3, before=0.15)
    assert not rising(hour_requests=19, hour_rate=0.5, before=0.0)  # too few to tell
    assert not rising(hour_requests=20, hour_rate=0.5, before=0.3)  # not twice
    assert not rising(hour_requests=20, hour_rate=0.08, before=0.0)  # under 10 points
    assert not rising(hour_requests=20, hour_rate=None, before=None)
    assert thresholds.amplification_high(1.51) and not thresholds.amplification_high(1.5)
    assert thresholds.breaker_open(2) and not thresholds.breaker_open(1)


def test_a_chart_leaves_gaps_where_nothing_was_measured() -> None:
    chart = spark([None, 1.0, 2.0, None, 1.5, None], title="t", fmt=str, threshold=1.5)

    assert len(chart.lines) == 1 and len(chart.dots) == 1
    assert chart.label == "t: latest 1.5, highest 2.0"
    assert chart.threshold_y is not None
    assert spark([None, None], title="t", fmt=str).label == "t: no data"


# -- cost ------------------------------------------------------------------------------------


def test_its_queries_do_not_grow_with_the_number_of_tools(
    agent_a: tuple[Agent, str], console: Client, catalog: Catalog
) -> None:
    names = ["tool_a", *(f"tool_{n}" for n in range(8))]
    catalog(*names, *(f"undo_{name}" for name in names))
    run = make_run(agent_a[0])

    def add_tool(name: str) -> None:
        call = make_call(run, name, attempts=1)
        attempt(call, 1)
        make_call(run, name, "unknown")
        replay_noted(tool=name)
        CircuitBreaker.objects.create(tool=name, state="closed")
        compensation = Compensation.objects.create(
            run=run, call=call, tool=f"undo_{name}", key=name, status="dead_lettered"
        )
        Ticket.objects.create(
            compensation=compensation,
            run=run,
            tool=f"undo_{name}",
            reason=Ticket.Reason.DEAD_LETTERED,
        )
        Approval.objects.create(
            run=run,
            tool=name,
            reason="policy",
            args_hash="x",
            expires_at=timezone.now() + timedelta(hours=1),
        )

    def queries() -> tuple[int, int]:
        with CaptureQueriesContext(connection) as page:
            assert console.get(PAGE).status_code == 200
        with CaptureQueriesContext(connection) as figures:
            tool_figures()
        return len(page.captured_queries), len(figures.captured_queries)

    add_tool("tool_a")
    one = queries()
    for n in range(8):
        add_tool(f"tool_{n}")
        make_call(run, f"made_up_{n}", "failed")  # not in the catalog: (unknown)
    many = queries()

    assert many == one
    assert one[1] == 7  # calls, attempts, replays, approvals, tickets, unknown, breakers


# -- access and bad addresses ------------------------------------------------------------


def test_it_shows_a_link_in_the_nav(console: Client) -> None:
    html = console.get(PAGE).content.decode()

    assert f'<a href="{PAGE}" aria-current="page">Metrics</a>' in html


def test_it_sends_anonymous_visitors_to_log_in_and_refuses_outsiders(
    django_user_model: Any,
) -> None:
    assert Client().get(PAGE).status_code == 302
    outsider = Client()
    outsider.force_login(django_user_model.objects.create_user(username="otto", password=None))
    assert outsider.get(PAGE).status_code == 403


@pytest.mark.parametrize(
    ("query", "status", "problem"),
    [
        ({"window": "week"}, 400, "window: must be “hour” or “day”, not “week”"),
        ({"window": ""}, 200, None),
        ({"tool": "x" * 129}, 400, "tool: Ensure this value has at most 128 characters"),
        ({"tool": "no_such_tool"}, 404, "tool: no tool named “no_such_tool”"),
    ],
)
def test_it_explains_a_bad_address(
    console: Client, query: dict[str, str], status: int, problem: str | None
) -> None:
    response = console.get(PAGE, query)

    assert response.status_code == status
    if problem:
        assert problem in response.content.decode()
        assert 'role="alert"' in response.content.decode()


def test_it_takes_only_get(console: Client) -> None:
    assert console.post(PAGE).status_code == 405
