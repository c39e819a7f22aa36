"""The console on a phone and on a desktop, in a real browser (Chromium through
Playwright): at 390 px (touch) and at 1400 px no page is wider than the screen — the
header folds into a Menu button, queues read as stacked cards, the timeline as a list,
tables scroll inside their card — and on the phone a reviewer approves and a support
person resolves by tapping. One browser serves the whole module; screenshots of every
page at both widths go to the temp folder."""

from __future__ import annotations

import re
from datetime import timedelta
from types import SimpleNamespace
from typing import Any
from unittest.mock import patch

import pytest
from django.utils import timezone

from compensations.models import Ticket
from tests.browser import (
    CONTEXTS,
    DESKTOP,
    PHONE,
    SHOTS,
    TIMEOUT_MS,
    WIDEST,
    needs_chromium,
)
from tests.compensations.conftest import dead_letter
from tests.toolops.approvals.test_console import hold
from toolops.approvals.models import Approval

from .conftest import PASSWORD, make_attempt, make_call, make_record, make_run, make_user

pytestmark = needs_chromium
# Ids as long as real ones: they must wrap, not widen the page.
LONG_RUN = "demo-20261202-000143-63a3-3-charge-timeout-with-a-long-suffix"


def open_tab(browser: Any, width: int) -> Any:
    tab = browser.new_context(**CONTEXTS[width]).new_page()
    tab.set_default_timeout(TIMEOUT_MS)
    return tab


@pytest.fixture
def scene(
    transactional_db: None, django_user_model: Any, agent_a: Any, console_catalog: Any
) -> SimpleNamespace:
    """A person who reviews and works tickets; a held call, a dead-lettered undo with its
    ticket, and a finished run whose calls include a retry, a reconcile look and a failure."""
    make_user(django_user_model, "pat", "reviewers", "support", "operators")
    agent = agent_a[0]
    approval = hold(make_run(agent, f"{LONG_RUN}-held"), "tc-held-0123456789abcdef")
    ticket = dead_letter(agent, f"{LONG_RUN}-undo")
    start = timezone.now() - timedelta(minutes=3)
    run = make_run(
        agent,
        LONG_RUN,
        status="completed",
        session_key="s-" + "7" * 40,
        attempts_used=5,
        created_at=start,
        ended_at=start + timedelta(seconds=9),
    )
    lanes = [
        ("create_order", "succeeded", ["ok"]),
        ("flaky_warehouse", "succeeded", ["retry", "ok"]),
        ("send_notification", "failed", ["unknown", "fatal"]),
    ]
    for step, (tool, status, outcomes) in enumerate(lanes):
        at = start + timedelta(seconds=2 * step)
        call = make_call(
            run,
            f"tc-{step}-{'f' * 30}",
            step,
            tool,
            status,
            attempts=len(outcomes),
            idempotency_key=f"{step}" * 64,
            args={"order_id": "ord_99b3f0129b494e2c"},
            created_at=at,
            finished_at=at + timedelta(seconds=1.5),
            error_message="connection reset by the notifications service " * 3
            if status == "failed"
            else "",
        )
        for number, outcome in enumerate(outcomes, start=1):
            make_attempt(
                call,
                number,
                outcome=outcome,
                duration_ms=410.0 * number,
                started_at=at + timedelta(milliseconds=500 * (number - 1)),
                waited_ms=100.0 if number > 1 else 0.0,
                downstream_request_id=f"req_{'0b28286cd4a540a0' * 2}",
            )
        make_record(call, state="recorded", fence=len(outcomes))
    return SimpleNamespace(approval=approval, ticket=ticket, run=run)


def log_in(tab: Any, base: str, next_path: str) -> None:
    tab.goto(f"{base}/console/login/?next={next_path}")
    tab.get_by_label("User name").fill("pat")
    tab.get_by_label("Password").fill(PASSWORD)
    tab.get_by_role("button", name="Log in").click()
    tab.wait_for_url(f"**{next_path}")


def pages_of(scene: SimpleNamespace) -> dict[str, str]:
    return {
        "approval": f"/console/approvals/{scene.approval.approval_id}/",
        "ticket": f"/console/tickets/{scene.ticket.pk}/",
        "approvals": "/console/approvals/",
        "tickets": "/console/tickets/?status=all",
        "home": "/console/",
        "runs": "/console/runs/",
        "metrics": "/console/metrics/?window=day",
        "health": "/console/health/",
        # Every other page a person reaches from the header or a list.
        "decided": "/console/approvals/?tab=decided",
        "resolved": "/console/tickets/?tab=resolved",
        "search": "/console/search/?q=charge-timeout",
        "unknown": "/console/unknown/",
        "tools": "/console/tools/",
        "agents": "/console/agents/",
        "audit": "/console/audit/",
        "lockouts": "/console/lockouts/",
        "profile": "/console/account/notifications/",
        "outbox": "/console/notifications/",
        "webhooks": "/console/notifications/webhooks/",
        "two-factor": "/console/account/two-factor/",
        "run": f"/console/runs/{scene.run.pk}/",  # last: the test goes on with it
    }


@pytest.mark.parametrize("width", [DESKTOP, PHONE])
def test_no_page_is_wider_than_the_screen(
    width: int, browser: Any, live_server: Any, scene: SimpleNamespace
) -> None:
    from playwright.sync_api import expect

    tab = open_tab(browser, width)
    log_in(tab, live_server.url, "/console/")
    too_wide = {}
    for name, path in pages_of(scene).items():
        tab.goto(f"{live_server.url}{path}")
        expect(tab.locator("main h1").first).to_be_visible()
        tab.screenshot(path=SHOTS / f"layout-{width}-{name}.png", full_page=True)
        widest, inner = tab.evaluate(f"[{WIDEST}, window.innerWidth]")
        # A phone zooms out to show what overflows: the screen's width is the test, not
        # the (then wider) window.
        if widest > min(inner, width):
            too_wide[name] = widest
    assert too_wide == {}, f"pages wider than {width} px"

    # The run page (opened last): on a phone the waterfall's bars give way to a list, each
    # call saying what it took in words, its attempts below it.
    calls = tab.locator(".waterfall tbody.call")
    expect(calls).to_have_count(3)
    expect(calls.nth(1).locator(".took")).to_have_text("1.5 s")
    expect(calls.nth(1).locator("tr.attempt-row")).to_have_count(2)
    bars = tab.locator(".waterfall .call-bar")
    if width == PHONE:
        expect(bars.first).to_be_hidden()
    else:
        expect(bars.first).to_be_visible()
    tab.context.close()


def test_the_menu_button_folds_the_header_on_a_phone_only(
    browser: Any, live_server: Any, scene: SimpleNamespace
) -> None:
    from playwright.sync_api import expect

    desk = open_tab(browser, DESKTOP)
    log_in(desk, live_server.url, "/console/")
    expect(desk.get_by_role("button", name="Menu")).to_be_hidden()
    expect(desk.locator(".topbar nav").get_by_role("link", name="Tickets")).to_be_visible()
    desk.context.close()

    phone = open_tab(browser, PHONE)
    log_in(phone, live_server.url, "/console/")
    menu = phone.get_by_role("button", name="Menu")
    tickets = phone.locator(".topbar nav").get_by_role("link", name="Tickets")
    expect(menu).to_have_attribute("aria-expanded", "false")
    expect(tickets).to_be_hidden()
    expect(phone.get_by_role("searchbox", name="Find by id")).to_be_hidden()

    menu.tap()
    expect(menu).to_have_attribute("aria-expanded", "true")
    expect(phone.get_by_role("button", name="Log out")).to_be_visible()
    expect(phone.get_by_role("searchbox", name="Find by id")).to_be_visible()
    assert phone.evaluate(WIDEST) <= PHONE
    phone.screenshot(path=SHOTS / "layout-390-menu.png", full_page=True)
    tickets.tap()
    phone.wait_for_url("**/console/tickets/")
    expect(phone.get_by_role("button", name="Menu")).to_have_attribute("aria-expanded", "false")
    phone.context.close()


def big_enough(button: Any) -> None:
    box = button.bounding_box()
    assert box["height"] >= 44 and box["width"] >= 44, box


def test_on_a_phone_a_reviewer_approves_by_tapping(
    browser: Any, live_server: Any, scene: SimpleNamespace
) -> None:
    from playwright.sync_api import expect

    approval = scene.approval
    tab = open_tab(browser, PHONE)
    log_in(tab, live_server.url, "/console/approvals/")
    # The queue is a stack of cards, each cell labelled: a tap on the approval's id opens it.
    expect(tab.locator("table.approvals thead")).to_be_hidden()
    expect(tab.locator(f"#approval-{approval.approval_id} td").nth(1)).to_have_attribute(
        "data-label", re.compile(".")
    )
    tab.locator(f"#approval-{approval.approval_id}").get_by_role("link").first.tap()
    tab.wait_for_url(f"**/console/approvals/{approval.approval_id}/")
    approve = tab.get_by_role("button", name="Approve")
    big_enough(approve)
    big_enough(tab.get_by_role("button", name="Reject"))
    with patch("toolops.tasks.execute_approved_call.delay", autospec=True) as delay:
        approve.tap()
        expect(tab.locator(".messages")).to_be_visible()
    assert tab.evaluate(WIDEST) <= PHONE
    tab.screenshot(path=SHOTS / "layout-390-approved.png", full_page=True)
    approval.refresh_from_db()
    assert approval.status == Approval.Status.APPROVED
    assert approval.decided_by.username == "pat"
    delay.assert_called_once_with(approval.pk)
    tab.context.close()


def test_on_a_phone_support_resolves_a_ticket_by_tapping(
    browser: Any, live_server: Any, scene: SimpleNamespace
) -> None:
    from playwright.sync_api import expect

    ticket = scene.ticket
    tab = open_tab(browser, PHONE)
    log_in(tab, live_server.url, "/console/tickets/")
    # A ticket opened meanwhile comes with the list's live refresh, a labelled card too.
    fresh = dead_letter(scene.run.agent, "r-fresh")
    expect(tab.locator(f"#ticket-{fresh.pk} td").nth(2)).to_have_attribute(
        "data-label", re.compile("."), timeout=10_000
    )
    tab.locator(f"#ticket-{ticket.pk}").get_by_role("link", name=f"#{ticket.pk}").tap()
    tab.wait_for_url(f"**/console/tickets/{ticket.pk}/")
    big_enough(tab.get_by_role("button", name="Retry"))
    resolve = tab.get_by_role("button", name="Resolve")
    big_enough(resolve)
    form = tab.locator("form", has=resolve)
    form.get_by_role("textbox").first.fill("Cancelled the order by hand in the shop admin.")
    resolve.tap()
    expect(tab.locator(".messages")).to_be_visible()
    # Closed: nothing is left to resolve.
    expect(tab.get_by_role("button", name="Resolve")).to_have_count(0)
    assert tab.evaluate(WIDEST) <= PHONE
    tab.screenshot(path=SHOTS / "layout-390-resolved.png", full_page=True)
    ticket.refresh_from_db()
    assert ticket.status == Ticket.Status.CLOSED
    assert ticket.events.filter(kind="resolved", actor__username="pat").exists()
    tab.context.close()
