"""The home in a real browser (Chromium through Playwright), at 1400 px and on a 390 px
phone: each thing that needs attention shown and its link leading to where it is worked,
"Nothing needs you now" when nothing does, the page taking in what happens meanwhile
without a reload, and the menu's Approvals and Tickets counts following on any page.
Screenshots of both widths go to the temp folder."""

from __future__ import annotations

import re
from typing import Any

import pytest

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

from .conftest import PASSWORD, make_run, make_user
from .home_scene import everything, open_breaker

pytestmark = needs_chromium


@pytest.fixture
def people(transactional_db: None, django_user_model: Any, console_catalog: Any) -> None:
    make_user(django_user_model, "pat", "reviewers", "support", "operators")
    make_user(django_user_model, "olga", "operators")


def logged_in_tab(browser: Any, base: str, width: int, username: str = "pat") -> Any:
    tab = browser.new_context(**CONTEXTS[width]).new_page()
    tab.set_default_timeout(TIMEOUT_MS)
    tab.goto(f"{base}/console/login/?next=/console/")
    tab.get_by_label("User name").fill(username)
    tab.get_by_label("Password").fill(PASSWORD)
    tab.get_by_role("button", name="Log in").click()
    tab.wait_for_url(f"{base}/console/")
    return tab


def fits(tab: Any, width: int) -> None:
    widest, inner = tab.evaluate(f"[{WIDEST}, window.innerWidth]")
    assert widest <= min(inner, width), f"{tab.url} is {widest} px wide at {width}"


@pytest.mark.parametrize("width", [DESKTOP, PHONE])
def test_each_signal_is_shown_and_its_link_leads_to_where_it_is_worked(
    width: int, browser: Any, live_server: Any, people: None, agent_a: Any
) -> None:
    from playwright.sync_api import expect

    scene = everything(agent_a[0])
    tab = logged_in_tab(browser, live_server.url, width)
    home = f"{live_server.url}/console/"
    main = tab.locator("main")
    expect(main.get_by_role("heading", name="What needs you now")).to_be_visible()
    for name in ("breakers", "tickets", "approvals", "unknown", "notifications"):
        expect(tab.locator(f"section.signal-{name}")).to_be_visible()
    expect(tab.locator("section.signal-breakers")).to_contain_text("flaky_warehouse")
    expect(tab.locator("section.signal-notifications")).to_contain_text("answered 500")
    fits(tab, width)
    tab.screenshot(path=SHOTS / f"home-{width}-signals.png", full_page=True)

    links = [
        ("1 tool switched off", "/console/health/", "Tool health"),
        ("1 ticket open", "/console/tickets/", "Tickets"),
        (f"#{scene.ticket.pk}", f"/console/tickets/{scene.ticket.pk}/", None),
        ("1 approval waiting", "/console/approvals/", "Approvals"),
        (scene.approval.approval_id, f"/console/approvals/{scene.approval.approval_id}/", None),
        ("1 unknown outcome waiting", "/console/unknown/", "Unknown outcomes"),
        ("1 notification failed", "/console/notifications/?status=failed", None),
    ]
    for text, path, heading in links:
        tab.goto(home)
        main.get_by_role("link", name=text, exact=False).first.click()
        tab.wait_for_url(f"{live_server.url}{path}")
        if heading:
            expect(main.get_by_role("heading", name=heading).first).to_be_visible()
        fits(tab, width)
    expect(tab.locator("tr.delivery-failed")).to_have_count(1)
    tab.context.close()


@pytest.mark.parametrize("width", [DESKTOP, PHONE])
def test_with_nothing_to_do_it_says_so_and_takes_in_a_breaker_that_opens_meanwhile(
    width: int, browser: Any, live_server: Any, people: None, agent_a: Any
) -> None:
    from playwright.sync_api import expect

    make_run(agent_a[0], "r-done", status="completed")
    tab = logged_in_tab(browser, live_server.url, width, "olga")
    expect(tab.get_by_text("Nothing needs you now.")).to_be_visible()
    expect(tab.locator("table.lately")).to_contain_text("r-done")
    fits(tab, width)
    tab.screenshot(path=SHOTS / f"home-{width}-empty.png", full_page=True)
    tab.evaluate("window.__notReloaded = true")

    open_breaker()

    # The home looks again every 10 s.
    expect(tab.locator("section.signal-breakers")).to_contain_text("flaky_warehouse")
    expect(tab.get_by_text("Nothing needs you now.")).to_have_count(0)
    assert tab.evaluate("window.__notReloaded") is True
    fits(tab, width)
    tab.context.close()


def test_the_menu_counts_follow_on_any_page_without_a_reload(
    browser: Any, live_server: Any, people: None, agent_a: Any
) -> None:
    from playwright.sync_api import expect

    tab = logged_in_tab(browser, live_server.url, DESKTOP)
    tab.goto(f"{live_server.url}/console/tools/")
    nav = tab.locator(".topbar nav")
    expect(nav.locator(".approvals-count")).to_have_count(0)
    expect(nav.locator(".tickets-count")).to_have_count(0)
    tab.evaluate("window.__notReloaded = true")

    hold(make_run(agent_a[0], "r-held"), "tc-held")
    dead_letter(agent_a[0], "r-undo")

    # The nav asks for its counts every 15 s.
    expect(nav.locator(".approvals-count")).to_have_text("1")
    expect(nav.locator(".tickets-count")).to_have_text("1")
    expect(nav.get_by_role("link", name=re.compile(r"^Approvals 1"))).to_be_visible()
    assert tab.evaluate("window.__notReloaded") is True
    tab.context.close()


@pytest.mark.parametrize("width", [DESKTOP, PHONE])
def test_the_pages_of_this_change_fit_the_screen(
    width: int, browser: Any, live_server: Any, people: None, agent_a: Any
) -> None:
    from playwright.sync_api import expect

    everything(agent_a[0])
    tab = logged_in_tab(browser, live_server.url, width)
    for name, path in {
        "runs": "/console/runs/",
        "outbox": "/console/notifications/",
        "webhooks": "/console/notifications/webhooks/",
    }.items():
        tab.goto(f"{live_server.url}{path}")
        expect(tab.locator("main h1")).to_be_visible()
        fits(tab, width)
        tab.screenshot(path=SHOTS / f"home-{width}-{name}.png", full_page=True)
    icon = tab.locator("link[rel=icon]").get_attribute("href")
    assert (
        tab.request.get(f"{live_server.url}{icon}")
        .headers["content-type"]
        .startswith("image/svg+xml")
    )
    tab.context.close()
