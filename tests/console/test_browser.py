"""The console in a real browser (Chromium through Playwright): log in, find a run by a
tool_call_id, open it, read its calls and attempts, and watch it refresh while running."""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import chromium_path

from .conftest import PASSWORD, make_attempt, make_call, make_record, make_run, make_user

# Playwright's sync API runs an event loop in this thread; Django's ORM refuses to run
# beside one unless told that this (test-only) thread is safe.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

CHROMIUM = chromium_path()
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="no chromium executable on PATH (Debian: apt-get install chromium)"
)
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run",
]  # fmt: skip
# For a person to look at the page after a run; never compared or committed.
SCREENSHOT = Path(tempfile.gettempdir()) / "run_detail.png"


@pytest.fixture
def browser_page(live_server: Any) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        context = browser.new_context(viewport={"width": 1440, "height": 1000})
        page = context.new_page()
        page.set_default_timeout(10_000)
        try:
            yield page
        finally:
            context.close()
            browser.close()


def test_it_finds_a_run_by_tool_call_id_and_shows_its_attempts(
    live_server: Any, transactional_db: None, django_user_model: Any,
    agent_a: Any, browser_page: Any,
) -> None:  # fmt: skip
    from playwright.sync_api import expect

    make_user(django_user_model, "rita", "reviewers")
    other = make_run(agent_a[0], "r-other", status="completed")
    make_call(other, "tc-unrelated", 0, "query_stock", "succeeded")
    run = make_run(agent_a[0], "r-browser", session_key="conv-7", max_attempts=10,
                   attempts_used=3)  # fmt: skip
    make_call(run, "tc-stock", 0, "query_stock", "succeeded", args={"sku": "A12"},
              result={"sku": "A12", "available": 3}, attempts=1)  # fmt: skip
    order = make_call(
        run, "tc-order-77", 1, "create_order", "unknown", attempts=2,
        idempotency_key="d" * 64, args={"sku": "A12", "qty": 1, "amount": "199.00"},
        error_class="unknown", error_reason="timeout",
        error_message="orders service timed out after 2 attempts",
        feedback="Order creation timed out and its outcome is unknown. Do not retry.",
    )  # fmt: skip
    make_attempt(order, 1, outcome="unknown", reason="timeout", error="read timeout",
                 duration_ms=2000.4, downstream_request_id="req-order-1")  # fmt: skip
    make_attempt(order, 2, purpose="reconcile", outcome="unknown", reason="timeout",
                 waited_ms=210.0, downstream_request_id="req-lookup-1")  # fmt: skip
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

    # The runs list, newest first.
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
    call = page.locator("#call-tc-order-77")
    expect(call).to_contain_text("create_order")
    expect(call).to_contain_text("orders service timed out after 2 attempts")
    expect(call.locator("table.attempts tbody tr")).to_have_count(2)
    expect(call.locator("table.attempts")).to_contain_text("req-lookup-1")
    expect(call.locator("dl.record")).to_contain_text("claimed")
    # Args stay collapsed until asked for.
    args = call.locator("details").first
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
    make_call(run, "tc-late", 2, "send_notification", "pending_approval")
    expect(page.locator("#call-tc-late")).to_contain_text("pending_approval", timeout=8_000)
    # ...and what the operator had opened stays open.
    expect(args.locator("pre")).to_be_visible()
    expect(call.locator("table.attempts")).to_contain_text("req-order-1")

    # Nothing was fetched from anywhere but the console itself: it works offline.
    assert sent and all(url.startswith(live_server.url) for url in sent), sent
