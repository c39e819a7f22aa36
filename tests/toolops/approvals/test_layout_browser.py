"""The approval pages at 1400 px and on a 390 px phone, in a real browser (Chromium through
Playwright): the possible duplicate's facts at the top, no page wider than the screen, no
text under 12 px, disclosure toggles at least 32 px tall, keyboard hints only where there
is a keyboard, and the queue's history tabs page."""

# ruff: noqa: F811

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from tests.browser import (
    CONTEXTS,
    DESKTOP,
    PHONE,
    SHOTS,
    TIMEOUT_MS,
    WIDEST,
    needs_chromium,
)
from tests.console.conftest import (  # noqa: F401 - fixtures shared with the console tests
    PASSWORD,
    fast_password_hashing,
    make_call,
    make_run,
    make_user,
)
from tests.console.facts_catalog import facts_catalog  # noqa: F401
from toolops.approvals import selectors
from toolops.approvals.models import Approval

from .test_console import hold

pytestmark = needs_chromium
# Every piece of text a person can see, with its size in px (hidden and 1-px clipped
# labels for screen readers aside).
TEXT_SIZES = """() => {
  const found = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const element = node.parentElement;
    if (!node.textContent.trim() || !element || !element.getClientRects().length) continue;
    if (element.closest(".visually-hidden, dialog:not([open])")) continue;
    const size = parseFloat(getComputedStyle(element).fontSize);
    found.push([node.textContent.trim().slice(0, 40), size]);
  }
  return found;
}"""
LONG_RUN = "demo-20261207-062526-4c06-15-order-again-with-a-long-suffix"


@pytest.fixture
def again(
    transactional_db: None, django_user_model: Any, agent_a: Any, facts_catalog: Any
) -> Approval:
    """An order made before, with its result, and the same order again in another run."""
    make_user(django_user_model, "rita", "reviewers")
    earlier = make_run(agent_a[0], f"{LONG_RUN}-1", session_key="s-1")
    args = {"sku": "D9", "qty": 1, "order_id": "ord_7bdc0e4ae42b4621"}
    first = make_call(
        earlier,
        "tc-1",
        0,
        "create_order",
        "succeeded",
        args={"sku": "D9", "qty": 1},
        result={"order_id": args["order_id"], "status": "created"},
        created_at=timezone.now() - timedelta(minutes=3),
    )
    run = make_run(agent_a[0], f"{LONG_RUN}-2", session_key="s-1")
    return hold(
        run,
        "tc-1",
        "create_order",
        {"sku": "D9", "qty": 1},
        reason="possible_duplicate",
        duplicate_of=first,
    )


def open_tab(browser: Any, width: int) -> Any:
    tab = browser.new_context(**CONTEXTS[width]).new_page()
    tab.set_default_timeout(TIMEOUT_MS)
    return tab


def log_in(tab: Any, base: str, next_path: str) -> None:
    tab.goto(f"{base}/console/login/?next={next_path}")
    tab.get_by_label("User name").fill("rita")
    tab.get_by_label("Password").fill(PASSWORD)
    tab.get_by_role("button", name="Log in").click()
    # Landed (the login page's own URL ends with `next` too), its scripts loaded.
    tab.wait_for_url(lambda at: "/login/" not in at and at.endswith(next_path))


def readable(tab: Any, width: int) -> None:
    """Nothing wider than the screen, no text under 12 px, every toggle 32 px tall."""
    assert tab.evaluate(WIDEST) <= width
    small = [(text, size) for text, size in tab.evaluate(TEXT_SIZES) if size < 12]
    assert not small, small
    for toggle in tab.locator("summary").all():
        if toggle.is_visible():
            assert toggle.bounding_box()["height"] >= 32, toggle.inner_text()


@pytest.mark.parametrize("width", [DESKTOP, PHONE])
def test_the_duplicate_reads_facts_first_at_every_width(
    browser: Any, live_server: Any, again: Approval, width: int
) -> None:
    from playwright.sync_api import expect

    tab = open_tab(browser, width)
    log_in(tab, live_server.url, f"/console/approvals/{again.approval_id}/")

    compared = tab.locator(".duplicate-compare")
    expect(compared).to_contain_text("Already done: order id ord_7bdc0e4ae42b4621, succeeded")
    expect(compared.get_by_role("columnheader")).to_have_text(["fact", "This call", "Already done"])
    # Above the Decide box: seen before deciding.
    decide = tab.locator(".card.decide")
    assert compared.bounding_box()["y"] < decide.bounding_box()["y"]
    hint = tab.locator(".keys-hint")
    if width == PHONE:
        expect(hint).to_be_hidden()
    else:
        expect(hint).to_be_visible()
    tab.locator("#approval-technical > summary").click()
    expect(tab.locator(".duplicate-result")).to_be_visible()
    readable(tab, width)
    tab.screenshot(path=SHOTS / f"approval-duplicate-{width}.png", full_page=True)
    tab.context.close()


@pytest.mark.parametrize("width", [DESKTOP, PHONE])
def test_the_history_tabs_page(
    browser: Any, live_server: Any, again: Approval, width: int, monkeypatch: Any
) -> None:
    from playwright.sync_api import expect

    monkeypatch.setattr(selectors, "HISTORY_PER_PAGE", 1)
    run = make_run(again.run.agent, "r-decided")
    ended = []
    for n, minutes in ((1, 20), (2, 10)):
        ended.append(hold(run, f"tc-d{n}", step_index=n))
        at = timezone.now() - timedelta(minutes=minutes)
        Approval.objects.filter(pk=ended[-1].pk).update(status="rejected", decided_at=at)
    tab = open_tab(browser, width)
    log_in(tab, live_server.url, "/console/approvals/?tab=decided")

    expect(tab.locator(".pager")).to_contain_text("page 1 of 2")
    expect(tab.locator("table.history tbody")).to_contain_text(ended[1].approval_id)
    readable(tab, width)
    tab.get_by_role("link", name="older ›").click()
    tab.wait_for_url("**/console/approvals/?tab=decided&page=2")
    expect(tab.locator(".pager")).to_contain_text("page 2 of 2")
    expect(tab.locator("table.history tbody")).to_contain_text(ended[0].approval_id)
    readable(tab, width)
    tab.context.close()
