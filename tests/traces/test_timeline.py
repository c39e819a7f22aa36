"""The run page as a waterfall (traces/console/timeline.py, traces/views/timeline.py):
calls and their attempts placed on the run's time axis, the waits between attempts, open
calls shown as such, undo calls linked both ways, where the run stopped, deep links, and
paging a long run in a constant number of queries."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.test import Client
from django.utils import timezone

from compensations.models import Compensation
from tests.console.conftest import logged_in, make_attempt, make_call, make_record, make_run
from tests.console.conftest import make_user as make_console_user
from toolops.models import Agent, Approval, Attempt, IdempotencyRecord, Run, ToolCall
from traces.console.timeline import PAGE_SIZE, timeline_build

pytestmark = pytest.mark.django_db
T0 = datetime(2026, 1, 5, 12, 0, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


@pytest.fixture(autouse=True)
def fast_password_hashing(settings: Any) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def reviewer(django_user_model: Any) -> Any:
    return make_console_user(django_user_model, "rita", "reviewers")


@pytest.fixture
def reviewer_client(reviewer: Any) -> Client:
    return logged_in(reviewer)


@pytest.fixture
def ended(agent_a: tuple[Agent, str]) -> Run:
    """A run of 10 s: tc-1 (0–1 s) with one attempt; tc-2 (2–6 s) retried after 2 s of
    backoff; tc-3 unknown, one attempt and one reconcile look."""
    run = make_run(agent_a[0], "r-axis", status="completed", created_at=T0, ended_at=at(10))
    stock = make_call(
        run, "tc-1", 0, "query_stock", "succeeded", created_at=at(0), finished_at=at(1), attempts=1
    )
    make_attempt(stock, 1, started_at=at(0.5), duration_ms=500.0)
    reserve = make_call(
        run,
        "tc-2",
        1,
        "reserve_stock",
        "succeeded",
        created_at=at(2),
        finished_at=at(6),
        attempts=2,
        idempotency_key="b" * 64,
    )
    make_attempt(
        reserve,
        1,
        started_at=at(2),
        duration_ms=1000.0,
        outcome="retry",
        http_status=503,
        downstream_request_id="req-first",
    )
    make_attempt(
        reserve,
        2,
        started_at=at(5),
        duration_ms=1000.0,
        waited_ms=2000.0,
        downstream_request_id="req-second",
    )
    make_record(reserve, state="recorded", recorded_at=at(6))
    order = make_call(
        run,
        "tc-3",
        2,
        "create_order",
        "unknown",
        created_at=at(7),
        attempts=1,
        error_class="unknown",
        error_reason="timeout",
    )
    make_attempt(order, 1, started_at=at(7), duration_ms=1000.0, outcome="unknown")
    make_attempt(
        order,
        1,
        started_at=at(8.5),
        duration_ms=500.0,
        purpose="reconcile",
        outcome="query_failed",
        downstream_request_id="req-look",
    )
    return run


def lanes(run: Run, **kw: Any) -> dict[str, Any]:
    return {row.call.tool_call_id: row for row in timeline_build(run=run, **kw).rows}


def test_it_places_calls_and_attempts_on_the_runs_time_axis(ended: Run) -> None:
    rows = lanes(ended)

    stock, reserve = rows["tc-1"], rows["tc-2"]
    assert (stock.bar.left, stock.bar.width) == pytest.approx((0, 10))
    assert [(a.bar.left, a.bar.width) for a in stock.attempts] == [pytest.approx((5, 5))]
    assert (reserve.bar.left, reserve.bar.width) == pytest.approx((20, 40))
    first, second = reserve.attempts
    assert (first.bar.left, first.bar.width, first.wait) == pytest.approx((20, 10, None))
    # The 2 s of backoff before the retry is its own stretch, just before it.
    assert (second.wait.left, second.wait.width) == pytest.approx((30, 20))
    assert (second.bar.left, second.bar.width) == pytest.approx((50, 10))
    assert (second.bar.left_pct, second.bar.width_pct) == ("50.00", "10.00")


def test_each_call_says_what_it_took_in_words_once_it_has_ended(ended: Run) -> None:
    rows = lanes(ended)

    # What a phone shows instead of the bars: from the call's creation to its outcome.
    assert [rows[t].took for t in ("tc-1", "tc-2", "tc-3")] == ["1.0 s", "4.0 s", ""]


def test_a_reconcile_look_is_marked_and_has_an_anchor_of_its_own(ended: Run) -> None:
    order = lanes(ended)["tc-3"]

    cid = order.call.call_id
    assert [(a.anchor, a.label, a.is_reconcile) for a in order.attempts] == [
        (f"attempt-{cid}-1", "attempt 1", False),
        (f"attempt-{cid}-r1", "reconcile look 1", True),
    ]


def test_the_page_shows_bars_anchors_waits_and_the_record(
    reviewer_client: Client, ended: Run
) -> None:
    page = reviewer_client.get(f"/console/runs/{ended.pk}/").content.decode()

    reserve = ToolCall.objects.get(tool_call_id="tc-2")
    lane = page.split(f'<tbody id="call-{reserve.call_id}"')[1].split("</tbody>")[0]
    assert f'<tr id="attempt-{reserve.call_id}-2" class="attempt-row">' in lane
    # Placed by console.js from data attributes: no style="" (the CSP allows none).
    assert '<span class="wait" data-left="30.00" data-width="20.00"' in lane
    assert 'class="bar attempt-bar o-ok" data-left="50.00" data-width="10.00"' in lane
    assert "style=" not in page
    assert "after 2000.0 ms of backoff" in lane
    # Each attempt opens on its downstream request id, and under its Technical details on
    # its span and the call's idempotency record (no jargon before that disclosure).
    attempt = lane.split(f'id="attempt-{reserve.call_id}-2"')[1].split("</tr>")[0]
    assert "<code>req-second</code>" in attempt
    plain, technical = attempt.split(
        f'<details class="technical" id="tech-attempt-{reserve.call_id}-2">'
    )
    assert "fence" not in plain and "child of" not in plain
    assert re.search(
        r"<dt>state</dt><dd>recorded</dd></div>\s*<div><dt>fence</dt><dd>1</dd>", technical
    )
    assert "2026-01-05 12:00:06 UTC" in technical  # recorded_at
    # Span ids: the call's, and each attempt's as its child.
    assert f"span <code>{reserve.span_id}</code>" in lane
    assert f"child of <code>{reserve.span_id}</code>" in technical
    # The axis' heading: +0 at the left, the run's 10 s at the right.
    assert '<span class="tick" data-left="0.0">+0 ms</span>' in page
    assert '<span class="tick" data-left="100.0">+10.0 s</span>' in page


def test_open_calls_run_to_now_and_say_what_they_wait_for(
    reviewer_client: Client, agent_a: tuple[Agent, str]
) -> None:
    # Open bars run to the moment the page is drawn, a little after `now`: on a scale of
    # 1,000 s, a busy machine's delay of a few seconds moves them less than the 0.5 %
    # the assertions allow.
    now = timezone.now()
    run = make_run(agent_a[0], "r-open", created_at=now - timedelta(seconds=1000))
    make_call(
        run, "tc-flying", 0, "reserve_stock", "in_progress", created_at=now - timedelta(seconds=500)
    )
    lost = make_call(
        run,
        "tc-lost",
        1,
        "create_order",
        "unknown",
        created_at=now - timedelta(seconds=400),
        next_reconcile_at=now + timedelta(seconds=30),
    )
    make_attempt(
        lost, 1, started_at=now - timedelta(seconds=400), duration_ms=100_000.0, outcome="unknown"
    )
    approval = Approval.objects.create(
        run=run,
        tool="charge",
        reason="irreversible",
        args_hash="h",
        expires_at=now + timedelta(hours=1),
    )
    make_call(
        run,
        "tc-charge",
        2,
        "charge",
        "pending_approval",
        approval=approval,
        created_at=now - timedelta(seconds=300),
    )

    response = reviewer_client.get(f"/console/runs/{run.pk}/")

    rows = {row.call.tool_call_id: row for row in response.context["rows"]}
    flying, waiting, held = rows["tc-flying"], rows["tc-lost"], rows["tc-charge"]
    assert (flying.state, flying.state_text) == ("in_flight", "in flight")
    assert flying.bar.left + flying.bar.width == pytest.approx(100, abs=0.5)
    assert waiting.state == "waiting_retry"
    assert waiting.state_text.startswith("waiting for retry: reconciled again at ")
    # The wait for its next look: from its attempt's end on.
    assert waiting.waiting.left == pytest.approx(70, abs=0.5)
    assert waiting.waiting.left + waiting.waiting.width == pytest.approx(100, abs=0.5)
    assert (held.state, held.state_text) == ("pending_approval", "waiting for approval")
    page = response.content.decode()
    assert '<span class="state">in flight</span>' in page
    assert f'href="/console/approvals/{approval.approval_id}/"' in page
    # The header: where it is held up and why.
    assert "Next: <a" in page
    assert "Step 0 reserve_stock is in flight." in page


def test_the_header_says_where_it_stopped_and_why(
    reviewer_client: Client, agent_a: tuple[Agent, str]
) -> None:
    run = make_run(agent_a[0], "r-breaker")
    ok = make_call(run, "tc-1", 0, "query_stock", "succeeded", attempts=3, tokens=120)
    make_call(
        run,
        "tc-2",
        4,
        "create_order",
        "failed",
        error_class="retry",
        error_reason="circuit_open",
        tokens=80,
        error_message="circuit open until 2026-01-05T12:01:00Z",
    )

    response = reviewer_client.get(f"/console/runs/{run.pk}/")

    page = response.content.decode()
    assert f'<a class="last-succeeded-id" href="#call-{ok.call_id}"><code>tc-1</code></a>' in page
    assert "Step 4 create_order failed: circuit open — retry after 2026-01-05T12:01:00Z." in page
    assert "Nothing was sent downstream for it." in page
    # An unlimited run's usage is summed from its calls, as the API does.
    assert re.search(r"attempts used / budget</dt>\s*<dd>3 / no limit</dd>", page)
    assert re.search(r"tokens used / budget</dt>\s*<dd>200 / no limit</dd>", page)


def test_a_limit_reached_is_said_in_words(
    reviewer_client: Client, agent_a: tuple[Agent, str]
) -> None:
    run = make_run(
        agent_a[0], "r-spent", status="budget_exhausted", max_attempts=3, attempts_used=3
    )

    page = reviewer_client.get(f"/console/runs/{run.pk}/").content.decode()

    assert re.search(r"attempts used / budget</dt>\s*<dd>3 / 3 \(used up\)</dd>", page)
    assert "budget is used up: it takes no more calls." in page


def test_undo_calls_link_to_the_call_they_undo_and_back(
    reviewer_client: Client, agent_a: tuple[Agent, str]
) -> None:
    run = make_run(agent_a[0], "r-undo", status="aborted")
    reserve = make_call(run, "tc-1", 0, "reserve_stock", "succeeded")
    undo = make_call(
        run,
        f"~undo:{reserve.call_id}:1",
        0,
        "release_stock",
        "succeeded",
        role="undo",
        trace_id="f" * 32,
        link=f"{run.trace_id}-{reserve.span_id}",
    )

    rows = lanes(run)

    assert rows[undo.tool_call_id].undoes.href == f"#call-{reserve.call_id}"
    assert rows[undo.tool_call_id].round == "1"
    assert [r.href for r in rows["tc-1"].undone_by] == [f"#call-{undo.call_id}"]
    page = reviewer_client.get(f"/console/runs/{run.pk}/").content.decode()
    assert f"its span links to <code>{run.trace_id}-{reserve.span_id}</code>" in page
    assert f"trace <code>{'f' * 32}</code>" in page
    # The agent's summary counts the agent's calls only.
    assert "All 1 of 1 tool call succeeded." in page


def test_args_are_shown_redacted_and_full_args_are_linked_only_with_the_permission(
    reviewer: Any, agent_a: tuple[Agent, str]
) -> None:
    run = make_run(agent_a[0], "r-secret")
    secret = make_call(
        run, "tc-1", 0, "login", "succeeded", args={"user": "ann", "password": "hunter2"}
    )

    page = logged_in(reviewer).get(f"/console/runs/{run.pk}/").content.decode()
    assert "hunter2" not in page
    assert "&quot;password&quot;: &quot;[redacted]&quot;" in page
    assert "Full args" not in page

    reviewer.user_permissions.add(Permission.objects.get(codename="view_full_args"))
    page = logged_in(reviewer).get(f"/console/runs/{run.pk}/").content.decode()
    assert f'<a href="/console/calls/{secret.call_id}/args/">Full args</a>' in page


def test_args_are_shown_as_every_console_page_shows_json() -> None:
    from toolops.views import common
    from traces.console import lanes

    # One helper for every page: the run page (its lanes) must not drift from the others.
    assert lanes.pretty is common.pretty


# -- a long run: paging, deep links, a constant number of queries ----------------------


def make_long_run(
    agent: Agent, count: int, *, stop_at: int | None = None, compensations: int = 0
) -> Run:
    """`count` calls, one a second; every 10th with three attempts (two retried). From
    `stop_at` on: that call failed, the later ones skipped. The first `compensations`
    calls each registered a compensation."""
    run = make_run(agent, f"r-long-{count}", created_at=T0)
    calls = []
    for i in range(count):
        status = "succeeded"
        if stop_at is not None and i >= stop_at:
            status = "failed" if i == stop_at else "skipped"
        calls.append(
            ToolCall(
                run=run,
                call_id=f"c-long-{count}-{i}",
                tool_call_id=f"tc-{i}",
                step_index=i,
                tool="reserve_stock",
                status=status,
                args={"sku": "A12", "qty": 1},
                args_digest="x",
                idempotency_key=f"{count}-{i}".rjust(64, "0"),
                attempts=3 if i % 10 == 0 else 1,
                created_at=at(i),
                finished_at=at(i + 0.5),
            )
        )
    ToolCall.objects.bulk_create(calls)
    attempts, records = [], []
    for i, c in enumerate(calls):
        for n in range(1, c.attempts + 1):
            attempts.append(
                Attempt(
                    call=c,
                    number=n,
                    span_id=f"{i:08x}{n:08x}",
                    started_at=at(i + 0.1 * n),
                    duration_ms=50.0,
                    waited_ms=20.0 if n > 1 else 0.0,
                    outcome="ok" if n == c.attempts else "retry",
                    downstream_request_id=f"req-{i}-{n}",
                )
            )
        records.append(
            IdempotencyRecord(
                key=c.idempotency_key,
                call_ref=c.call_id,
                tool=c.tool,
                state="recorded",
                lease_until=at(i + 30),
                expires_at=at(i + 86400),
            )
        )
    Attempt.objects.bulk_create(attempts)
    IdempotencyRecord.objects.bulk_create(records)
    Compensation.objects.bulk_create(
        Compensation(run=run, call=c, tool="release_stock", key=c.idempotency_key)
        for c in calls[:compensations]
    )
    return run


# session, user, the user's groups, the run with its agent, all its calls (a few columns),
# the shown calls whole, their attempts, their idempotency records, all its compensations
# (a few columns), the shown calls' compensations whole, the user's two permission lookups
# (may they read full args?), the nav's three counts.
TIMELINE_QUERIES = 15


@pytest.mark.parametrize("page", ["", "?page=1", "?page=10"])
def test_a_run_of_1000_calls_is_shown_in_a_constant_number_of_queries(
    reviewer_client: Client,
    agent_a: tuple[Agent, str],
    django_assert_num_queries: Any,
    page: str,
) -> None:
    run = make_long_run(agent_a[0], 1000, stop_at=650, compensations=650)

    with django_assert_num_queries(TIMELINE_QUERIES):
        response = reviewer_client.get(f"/console/runs/{run.pk}/{page}")

    assert response.status_code == 200
    assert len(response.context["rows"]) == PAGE_SIZE


def test_a_short_run_takes_the_same_queries(
    reviewer_client: Client, ended: Run, django_assert_num_queries: Any
) -> None:
    with django_assert_num_queries(TIMELINE_QUERIES):
        reviewer_client.get(f"/console/runs/{ended.pk}/")


def test_a_long_run_opens_on_the_page_where_it_stopped(
    reviewer_client: Client, agent_a: tuple[Agent, str]
) -> None:
    run = make_long_run(agent_a[0], 1000, stop_at=650)

    response = reviewer_client.get(f"/console/runs/{run.pk}/")

    timeline = response.context["timeline"]
    assert PAGE_SIZE == 100
    assert (timeline.window.number, timeline.window.pages) == (7, 10)
    assert [r.call.step_index for r in response.context["rows"]][::99] == [600, 699]
    assert response.context["stop"].call.tool_call_id == "tc-650"
    assert response.context["last_succeeded"] == "tc-649"
    page = response.content.decode()
    assert "calls 601–700 of 1000, page 7 of 10" in page
    assert '<a href="?page=6" rel="prev">← earlier</a>' in page
    assert '<a href="?page=8" rel="next">later →</a>' in page
    assert '<span class="badge marker stop">stopped here</span>' in page


def test_other_pages_link_back_to_where_it_stopped(
    reviewer_client: Client, agent_a: tuple[Agent, str]
) -> None:
    run = make_long_run(agent_a[0], 1000, stop_at=650)

    first = reviewer_client.get(f"/console/runs/{run.pk}/", {"page": "1"})
    beyond = reviewer_client.get(f"/console/runs/{run.pk}/", {"page": "99"})

    assert [r.call.step_index for r in first.context["rows"]][:2] == [0, 1]
    page = first.content.decode()
    assert '<a href="?page=7#call-c-long-1000-650">where it stopped (page 7)</a>' in page
    # Links to calls on another page carry that page; the header's too.
    assert 'href="?page=7#call-c-long-1000-650"><code>tc-650</code></a>' in page
    assert beyond.context["timeline"].window.number == 10
    for odd in ("²", "-1", "x", "9" * 40):  # the page where it stopped, or the last
        assert reviewer_client.get(f"/console/runs/{run.pk}/", {"page": odd}).status_code == 200
    # Only the window's calls are read whole: the stop's attempts come along for the header.
    assert "<code>req-650-3</code>" in page


def test_a_calls_deep_link_lands_on_its_page_at_its_anchor(
    reviewer_client: Client, agent_a: tuple[Agent, str], ended: Run
) -> None:
    run = make_long_run(agent_a[0], 1000)
    short = ToolCall.objects.get(run=ended, tool_call_id="tc-2")

    deep = reviewer_client.get("/console/calls/c-long-1000-450/")
    near = reviewer_client.get(f"/console/calls/{short.call_id}/")

    assert deep["Location"] == f"/console/runs/{run.pk}/?page=5#call-c-long-1000-450"
    assert near["Location"] == f"/console/runs/{ended.pk}/#call-{short.call_id}"
    assert reviewer_client.get("/console/calls/c-nope/").status_code == 404
    assert (
        Client().get(f"/console/calls/{short.call_id}/")["Location"].startswith("/console/login/")
    )


def test_searching_a_calls_id_lands_at_the_call(
    reviewer_client: Client, agent_a: tuple[Agent, str]
) -> None:
    run = make_long_run(agent_a[0], 1000)

    for q in ("tc-450", "c-long-1000-450"):
        response = reviewer_client.get("/console/search/", {"q": q})
        assert response["Location"] == f"/console/runs/{run.pk}/?page=5#call-c-long-1000-450"
