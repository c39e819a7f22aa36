"""The console in a real browser (Chromium through Playwright): log in, find a run by a
tool_call_id, open it, read its calls and attempts, and watch it refresh while running;
settle an unknown outcome, and force a circuit breaker open and reset it; a live page told
of many changes fetches itself about once a second, the last change included."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from tests.browser import SHOTS, needs_chromium, open_page
from tests.waiting import wait_until

from .conftest import PASSWORD, make_attempt, make_call, make_record, make_run, make_user

pytestmark = needs_chromium
SCREENSHOT = SHOTS / "run_detail.png"


@pytest.fixture
def browser_page(live_server: Any) -> Iterator[Any]:
    with open_page() as page:
        yield page


def test_it_finds_a_run_by_tool_call_id_and_shows_its_attempts(
    live_server: Any,
    transactional_db: None,
    django_user_model: Any,
    agent_a: Any,
    browser_page: Any,
) -> None:
    from playwright.sync_api import expect

    make_user(django_user_model, "rita", "reviewers")
    other = make_run(agent_a[0], "r-other", status="completed")
    make_call(other, "tc-unrelated", 0, "query_stock", "succeeded")
    run = make_run(agent_a[0], "r-browser", session_key="conv-7", max_attempts=10, attempts_used=3)
    make_call(
        run,
        "tc-stock",
        0,
        "query_stock",
        "succeeded",
        args={"sku": "A12"},
        result={"sku": "A12", "available": 3},
        attempts=1,
    )
    order = make_call(
        run,
        "tc-order-77",
        1,
        "create_order",
        "unknown",
        attempts=2,
        idempotency_key="d" * 64,
        args={"sku": "A12", "qty": 1, "amount": "199.00"},
        error_class="unknown",
        error_reason="timeout",
        error_message="orders service timed out after 2 attempts",
        feedback="Order creation timed out and its outcome is unknown. Do not retry.",
    )
    make_attempt(
        order,
        1,
        outcome="unknown",
        reason="timeout",
        error="read timeout",
        duration_ms=2000.4,
        downstream_request_id="req-order-1",
    )
    make_attempt(
        order,
        2,
        purpose="reconcile",
        outcome="unknown",
        reason="timeout",
        waited_ms=210.0,
        downstream_request_id="req-lookup-1",
    )
    make_record(order, state="claimed", fence=2)

    page = browser_page
    sent: list[str] = []
    page.on("request", lambda request: sent.append(request.url))

    # The console sends an anonymous visitor to the login form.
    page.goto(f"{live_server.url}/console/")
    expect(page).to_have_url(re.compile(r"/console/login/\?next=/console/$"))
    page.get_by_label("User name").fill("rita")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()

    # A reviewer lands on her queue; the runs list is one link away, newest first.
    expect(page.get_by_role("heading", name="Approvals")).to_be_visible()
    page.goto(f"{live_server.url}/console/runs/")
    expect(page.get_by_role("heading", name="Runs")).to_be_visible()
    expect(page.locator("table.runs tbody tr")).to_have_count(2)
    expect(page.locator("table.runs tbody tr").first).to_contain_text("r-browser")
    expect(page.locator(".topbar .badge.role")).to_have_text("reviewers")

    # One search box finds the run by one of its calls' tool_call_id.
    page.get_by_label("Search").fill("tc-order-77")
    page.get_by_role("button", name="Filter").click()
    expect(page.locator("table.runs tbody tr")).to_have_count(1)
    expect(page.locator("table.runs tbody tr")).to_contain_text("Based on partial data")

    page.get_by_role("link", name="r-browser").click()

    # The run: its calls, the stop point, the attempts and the idempotency record.
    expect(page.get_by_role("heading", name=re.compile("Run r-browser"))).to_be_visible()
    expect(page.locator(".last-succeeded-id")).to_have_text("tc-stock")
    call = page.locator(f"#call-{order.call_id}")
    expect(call).to_contain_text("create_order")
    expect(call).to_contain_text("orders service timed out after 2 attempts")
    expect(call.locator("tr.attempt-row")).to_have_count(2)
    expect(call.locator("tr.attempt-row").last).to_contain_text("req-lookup-1")
    expect(call.locator("tr.attempt-row").last.locator("dl.record")).to_contain_text("claimed")
    # Args stay collapsed until asked for.
    args = call.locator(f"#args-{order.call_id}")
    expect(args.locator("pre")).to_be_hidden()
    args.locator("summary").click()
    expect(args.locator("pre")).to_contain_text('"amount": "199.00"')
    # The stylesheet was served and applied (a succeeded badge is green on green).
    colour = page.evaluate(
        "getComputedStyle(document.querySelector('.badge.s-succeeded')).backgroundColor"
    )
    assert colour == "rgb(218, 251, 225)"
    page.screenshot(path=SCREENSHOT, full_page=True)

    # While the run is running, htmx (served locally) refreshes the page body.
    late = make_call(run, "tc-late", 2, "send_notification", "pending_approval")
    expect(page.locator(f"#call-{late.call_id}")).to_contain_text("pending_approval", timeout=8_000)
    # ...and what the operator had opened stays open.
    expect(args.locator("pre")).to_be_visible()
    expect(call.locator("tr.attempt-row").first).to_contain_text("req-order-1")

    # Nothing was fetched from anywhere but the console itself: it works offline.
    assert sent and all(url.startswith(live_server.url) for url in sent), sent


def test_it_lets_an_operator_settle_an_unknown_outcome_and_work_a_breaker(
    live_server: Any,
    transactional_db: None,
    django_user_model: Any,
    agent_a: Any,
    console_catalog: Any,
    browser_page: Any,
) -> None:
    from django.utils import timezone
    from playwright.sync_api import expect

    from toolops.models import AuditEntry, CircuitBreaker, ToolCall

    operator = make_user(django_user_model, "olga", "operators")
    now = timezone.now()
    run = make_run(agent_a[0], "r-unknown")
    lost = make_call(
        run,
        "tc-lost-order",
        0,
        "create_order",
        "unknown",
        error_class="unknown",
        error_reason="timeout",
        error_message="orders service timed out after 2 attempts",
        client_reference="ref-77",
        reconcile_attempts=20,
        created_at=now - timedelta(minutes=42),
    )
    make_attempt(
        lost,
        1,
        outcome="unknown",
        reason="timeout",
        tool="create_order",
        health="failure",
        downstream_request_id="req-o-1",
    )
    make_call(
        run,
        "tc-notify",
        1,
        "send_notification",
        "unknown",
        error_class="unknown",
        error_reason="downstream_error",
        error_message="502 Bad Gateway",
        created_at=now - timedelta(minutes=7),
    )
    # Some history for the health page: flaky_warehouse failing over its 10 s window.
    lookup = make_call(run, "tc-lookup", 2, "flaky_warehouse", "failed", error_reason="timeout")
    for number, health in enumerate(["failure", "failure", "success"], start=1):
        make_attempt(
            lookup,
            number,
            tool="flaky_warehouse",
            health=health,
            outcome="retry",
            duration_ms=30.0 * number,
        )
    CircuitBreaker.objects.create(
        tool="flaky_warehouse",
        state="open",
        consecutive_failures=3,
        opened_at=now,
        open_until=now + timedelta(seconds=60),
        reason="3 consecutive failures",
    )

    page = browser_page
    page.goto(f"{live_server.url}/console/unknown/")
    page.get_by_label("User name").fill("olga")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()

    # The list: oldest first, with the count in the navigation.
    expect(page.get_by_role("heading", name="Unknown outcomes")).to_be_visible()
    expect(page.locator(".topbar .badge.count")).to_have_text("2")
    rows = page.locator("table.unknown tbody tr")
    expect(rows).to_have_count(2)
    expect(rows.first).to_contain_text("tc-lost-order")
    expect(rows.first).to_contain_text("needs a person")
    expect(rows.first).to_contain_text("query_order")
    expect(rows.nth(1)).to_contain_text("no query tool")
    page.screenshot(path=SHOTS / "unknown_outcomes.png", full_page=True)

    rows.first.get_by_role("link", name="Settle…").click()
    expect(page.get_by_role("heading", name=re.compile("Settle create_order"))).to_be_visible()
    expect(page.locator("dl.facts")).to_contain_text("req-o-1")
    # A typo in the result JSON: the form says so and nothing is settled.
    page.get_by_label("Did take effect", exact=True).check()
    page.get_by_label("Note").fill("Order o-77 is in the shop admin under ref-77.")
    page.get_by_label("Result (JSON, optional)").fill('{"order_id": "o-77"')
    page.get_by_role("button", name="Settle").click()
    expect(page.locator(".field-error")).to_contain_text("Enter valid JSON")
    assert ToolCall.objects.get(pk=lost.pk).status == "unknown"
    page.get_by_label("Result (JSON, optional)").fill('{"order_id": "o-77"}')
    page.screenshot(path=SHOTS / "unknown_settle.png", full_page=True)
    page.get_by_role("button", name="Settle").click()

    # Back on the list: settled, gone from it, and the badge counts one.
    expect(page.locator(".messages")).to_contain_text("Settled create_order (tc-lost-order)")
    expect(rows).to_have_count(1)
    expect(page.locator("table.unknown")).not_to_contain_text("tc-lost-order")
    expect(page.locator(".topbar .badge.count")).to_have_text("1")
    lost.refresh_from_db()
    assert (lost.status, lost.settled_by, lost.result) == (
        "succeeded",
        operator,
        {"order_id": "o-77"},
    )
    assert (
        AuditEntry.objects.filter(
            action="call.settle", object_id=lost.call_id, actor=operator
        ).count()
        == 1
    )
    # The run page says who settled it and why.
    rows.first.get_by_role("link", name="r-unknown").click()
    settled = page.locator(f"#call-{lost.call_id}")
    expect(settled).to_contain_text("Settled by hand by olga")
    expect(settled).to_contain_text("Order o-77 is in the shop admin under ref-77.")
    expect(settled.locator(".badge.s-succeeded")).to_be_visible()
    settled.scroll_into_view_if_needed()
    page.screenshot(path=SHOTS / "run_detail_settled.png")

    # Tool health: force a breaker open, then reset it.
    page.get_by_role("link", name="Tool health").click()
    expect(page.get_by_role("heading", name="Tool health")).to_be_visible()
    flaky = page.locator("#health-flaky_warehouse")
    expect(flaky.locator(".badge.b-open")).to_be_visible()
    expect(flaky).to_contain_text("2 / 3")
    order = page.locator("#health-create_order")
    expect(order.locator(".badge.b-closed")).to_be_visible()
    # Out of range: the row says so and nothing changes.
    order.get_by_label("Minutes").fill("0")
    order.get_by_label("Reason").fill("orders DB failover")
    page.once("dialog", lambda dialog: dialog.accept())  # console.js asks once more
    order.get_by_role("button", name="Force open").click()
    expect(order.locator(".field-error").first).to_contain_text("greater than or equal to 1")
    expect(order.locator(".badge.b-closed")).to_be_visible()
    page.screenshot(path=SHOTS / "tool_health_error.png", full_page=True)
    assert not CircuitBreaker.objects.filter(tool="create_order").exists()
    order.get_by_label("Minutes").fill("15")
    order.get_by_label("I understand every call will fail").check()
    page.once("dialog", lambda dialog: dialog.accept())  # console.js asks once more
    order.get_by_role("button", name="Force open").click()
    expect(page.locator(".messages")).to_contain_text("held open for 15 min")
    expect(order.locator(".badge.b-open")).to_be_visible()
    expect(order.locator(".badge.forced")).to_be_visible()
    expect(order).to_contain_text("orders DB failover")
    page.screenshot(path=SHOTS / "tool_health.png", full_page=True)
    forced = CircuitBreaker.objects.get(tool="create_order")
    assert (forced.state, forced.forced) == ("open", True)

    order.get_by_role("button", name="Reset").click()
    expect(page.locator(".messages")).to_contain_text("Breaker for create_order reset")
    expect(order.locator(".badge.b-closed")).to_be_visible()
    expect(order.locator(".badge.forced")).to_have_count(0)
    assert not CircuitBreaker.objects.get(tool="create_order").forced
    assert AuditEntry.objects.filter(object_type="breaker").count() == 2


def test_a_live_page_told_of_many_changes_fetches_at_most_once_a_second(
    live_server: Any,
    transactional_db: None,
    django_user_model: Any,
    agent_a: Any,
    browser_page: Any,
    settings: Any,
) -> None:
    from playwright.sync_api import expect

    # The page is told of changes over its socket; the test stands in for the server.
    settings.REDIS_URL = "redis://127.0.0.1:1/0"  # only read as "set" by the page
    make_user(django_user_model, "rita", "reviewers")
    run = make_run(agent_a[0], "r-busy")
    make_call(run, "tc-0", 0, "query_stock", "succeeded")
    page = browser_page
    page.add_init_script(
        "window.__sockets = []; window.__fetches = [];"
        "window.WebSocket = function (url) {"
        "  const socket = { url: url, close: function () {} };"
        "  window.__sockets.push(socket);"
        "  setTimeout(function () { socket.onopen(); }, 0);"
        "  return socket; };"
        # The moments the page decides to fetch (console.js triggers live-changed): the
        # gap it keeps is between these; the request itself may start a little later.
        "document.addEventListener('live-changed', function () {"
        "  window.__fetches.push(performance.now()); });"
    )
    page.goto(f"{live_server.url}/console/runs/{run.pk}/")
    page.get_by_label("User name").fill("rita")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("heading", name=re.compile("Run r-busy"))).to_be_visible()
    expect(page.locator("body")).to_have_attribute("data-push-connected", "1")
    assert page.locator("#run-body").get_attribute("data-live") == "push"

    # A busy run: a change every 50 ms for 2 s, and a new call made before the last one.
    page.evaluate(
        "async () => { for (let i = 0; i < 40; i++) {"
        "  window.__sockets[0].onmessage({ data: '{}' });"
        "  await new Promise((done) => setTimeout(done, 50)); } }"
    )
    late = make_call(run, "tc-late", 1, "reserve_stock", "succeeded")
    told = page.evaluate("window.__sockets[0].onmessage({ data: '{}' }); performance.now()")

    # The last change is shown, fetched at the end of its gap...
    expect(page.locator(f"#call-{late.call_id}")).to_be_visible(timeout=3_000)
    # ...and the page fetched about once a second, not 41 times: counted once a whole gap
    # has passed, by the page's clock, since its last fetch (no trailing fetch is due).
    # (Polled from here: wait_for_function evals in the page, which the CSP refuses.)
    wait_until(lambda: page.evaluate("performance.now() - window.__fetches.at(-1) > 1100"))
    fetches = page.evaluate("window.__fetches")
    assert 2 <= len(fetches) <= 4, fetches
    gaps = [b - a for a, b in zip(fetches, fetches[1:], strict=False)]
    assert all(gap >= 990 for gap in gaps), gaps
    assert fetches[-1] >= told
