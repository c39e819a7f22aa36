"""The support desk in a real browser (Chromium through Playwright), as a support person
works it: bulk actions on a mix of open and closed tickets, the tab that is highlighted,
assigning to a colleague, snoozing and the snooze's return, the customer's consequence
before and after the refund (the worker's own service, against the real shop), the
contact link; and the desk's pages at 1400 and 390 px wide."""

# ruff: noqa: F811

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any
from unittest.mock import MagicMock

import pytest
from django.utils import timezone

from compensations.desk import ticket_resolve
from compensations.models import Compensation, Ticket
from compensations.services import compensation_run_next, run_conclude
from tests.browser import (
    CONTEXTS,
    DESKTOP,
    PHONE,
    SHOTS,
    TIMEOUT_MS,
    WIDEST,
    needs_chromium,
)
from tests.compensations.test_saga_worker import REFUND, STOCK, abort
from tests.conftest import Shop
from tests.console.conftest import PASSWORD, make_user
from tests.toolops.executor.helpers import allow_without_approval, call_ok, start_run
from toolops.audit.models import AuditEntry
from toolops.models import Agent, Run

from .conftest import dead_letter
from .desk_catalog import desk_catalog, refund_dead_lettered  # noqa: F401

pytestmark = needs_chromium
# Every visible piece of text smaller than 12 px, and every column label drawn before a
# cell (the stacked cards on a phone): [where, text, size].
SMALL_TEXT = """() => {
  const small = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  while (walker.nextNode()) {
    const node = walker.currentNode;
    const element = node.parentElement;
    if (!node.textContent.trim() || !element.getClientRects().length) { continue; }
    if (element.closest(".visually-hidden")) { continue; }
    const size = parseFloat(getComputedStyle(element).fontSize);
    const where = element.className || element.tagName;
    if (size < 12) { small.push([where, node.textContent.trim(), size]); }
  }
  document.querySelectorAll("td[data-label]").forEach(function (cell) {
    const before = getComputedStyle(cell, "::before");
    const size = parseFloat(before.fontSize);
    if (before.content !== "none" && cell.getClientRects().length && size < 12) {
      small.push(["::before", cell.dataset.label, size]);
    }
  });
  return small;
}"""


def open_tab(browser: Any, base: str, width: int = DESKTOP, user: str = "sam") -> Any:
    """A new person's tab, logged in."""
    tab = browser.new_context(**CONTEXTS[width]).new_page()
    tab.set_default_timeout(TIMEOUT_MS)
    tab.goto(f"{base}/console/login/?next=/console/tickets/")
    tab.get_by_label("User name").fill(user)
    tab.get_by_label("Password").fill(PASSWORD)
    tab.get_by_role("button", name="Log in").click()
    tab.wait_for_url("**/console/tickets/")
    return tab


def highlighted(tab: Any, name: str) -> None:
    """The page's one highlighted tab is `name` (its label and count)."""
    from playwright.sync_api import expect

    expect(tab.locator("nav.tabs a[aria-current=page]")).to_have_text([name])


def test_bulk_actions_act_on_open_tickets_only_and_the_tab_shown_is_highlighted(
    browser: Any,
    live_server: Any,
    transactional_db: None,
    django_user_model: Any,
    agent_a: Any,
    lost_messages: MagicMock,
) -> None:
    from playwright.sync_api import expect

    sam = make_user(django_user_model, "sam", "support")
    tickets = [dead_letter(agent_a[0], f"r-mix-{n}") for n in range(4)]
    for closed in tickets[2:]:
        ticket_resolve(ticket=closed, by=sam, note="Cancelled in the shop admin.")
    (a, b), (c, d) = (t.pk for t in tickets[:2]), (t.pk for t in tickets[2:])
    tab = open_tab(browser, live_server.url)
    highlighted(tab, "Open 2")

    tab.goto(f"{live_server.url}/console/tickets/?status=all")
    highlighted(tab, "All")
    # A closed ticket cannot be selected: only the open ones have a box.
    expect(tab.locator("table.tickets tbody tr")).to_have_count(4)
    boxes = tab.locator("table.tickets input[type=checkbox]")
    expect(boxes).to_have_count(2)
    for pk in (c, d):
        expect(tab.locator(f"#ticket-{pk} input[type=checkbox]")).to_have_count(0)
    boxes.nth(0).check()
    boxes.nth(1).check()
    # A page opened before two tickets were closed would still send them.
    tab.evaluate(
        """(ids) => ids.forEach(function (id) {
             const stale = document.createElement("input");
             stale.type = "hidden"; stale.name = "ids"; stale.value = id;
             document.getElementById("bulk-form").appendChild(stale);
           })""",
        [c, d],
    )
    tab.get_by_role("button", name="Assign selected to me").click()

    expect(tab.locator(".messages")).to_have_text(
        f"Assigned 2 tickets to you: #{a}, #{b}; skipped 2 closed tickets: #{c}, #{d} "
        "(only open tickets are acted on)."
    )
    highlighted(tab, "All")
    assert set(Ticket.objects.filter(assignee=sam).values_list("pk", flat=True)) == {a, b}

    tab.get_by_role("checkbox", name=f"Select ticket {a}").check()
    tab.get_by_role("button", name="Retry selected").click()
    expect(tab.locator(".messages")).to_have_text(f"Retry queued for 1 ticket: #{a}.")
    expect(tab.locator(".messages")).not_to_contain_text("compensation")

    tab.context.close()


def test_the_highlighted_tab_is_the_one_whose_tickets_are_shown(
    browser: Any,
    live_server: Any,
    transactional_db: None,
    django_user_model: Any,
    agent_a: Any,
) -> None:
    from playwright.sync_api import expect

    sam = make_user(django_user_model, "sam", "support")
    open_one, closed = dead_letter(agent_a[0], "r-open"), dead_letter(agent_a[0], "r-closed")
    ticket_resolve(ticket=closed, by=sam, note="Cancelled in the shop admin.")
    tab = open_tab(browser, live_server.url)
    highlighted(tab, "Open 1")
    expect(tab.locator(f"#ticket-{open_one.pk}")).to_be_visible()

    # Closed tickets through the status filter: the Resolved tab is the one highlighted.
    # By its name: a label's text holds its options, and a tool registered in code by
    # another test ("key_status") would make "Status" name the tool filter too.
    tab.locator("form.filters select[name=status]").select_option("closed")
    tab.get_by_role("button", name="Filter").click()
    tab.wait_for_url(re.compile(r"status=closed"))
    highlighted(tab, "Resolved 1")
    expect(tab.locator(f"#ticket-{closed.pk}")).to_be_visible()
    expect(tab.locator("table.tickets input[type=checkbox]")).to_have_count(0)
    expect(tab.get_by_role("button", name="Retry selected")).to_have_count(0)
    tab.locator("nav.tabs").get_by_role("link", name=re.compile("^Snoozed")).click()
    highlighted(tab, "Snoozed 0")
    tab.context.close()


def test_a_ticket_is_assigned_to_a_colleague_and_snoozed_until_it_comes_back(
    browser: Any,
    live_server: Any,
    transactional_db: None,
    django_user_model: Any,
    agent_a: Any,
) -> None:
    from playwright.sync_api import expect

    make_user(django_user_model, "sam", "support")
    make_user(django_user_model, "sue", "support")
    make_user(django_user_model, "rita", "reviewers")
    ticket = dead_letter(agent_a[0], "r-snooze")
    tab = open_tab(browser, live_server.url)
    tab.locator(f"#ticket-{ticket.pk}").get_by_role("link", name=f"#{ticket.pk}").click()

    assign = tab.get_by_label("Assign to")
    expect(assign.locator("option")).to_have_text(["sam (me)", "sue"])
    assign.select_option("sue")
    tab.get_by_role("button", name="Assign", exact=True).click()
    expect(tab.locator(".messages")).to_have_text("Assigned to sue.")
    expect(tab.locator(".assignee")).to_have_text("sue")

    # A time that has passed is refused, naming the problem; nothing changes.
    tab.get_by_label("Snooze", exact=True).select_option("custom")
    tab.get_by_label("Date and time (UTC)").fill("2020-01-01T09:00")
    tab.get_by_role("button", name="Snooze", exact=True).click()
    expect(tab.locator(".messages")).to_contain_text("Not snoozed:")
    expect(tab.locator(".messages")).to_contain_text("has already passed: choose a time to come.")
    ticket.refresh_from_db()
    assert ticket.snoozed_until is None

    until = (datetime.now(UTC) + timedelta(hours=2)).replace(second=0, microsecond=0)
    tab.get_by_label("Snooze", exact=True).select_option("custom")
    tab.get_by_label("Date and time (UTC)").fill(f"{until:%Y-%m-%dT%H:%M}")
    tab.get_by_role("button", name="Snooze", exact=True).click()
    said = rf"Snoozed until (\d+ \w+ \d+ )?{until:%H:%M} UTC \(in 1 h"
    expect(tab.locator(".messages")).to_contain_text(re.compile(said))
    expect(tab.locator(".snooze-line")).to_contain_text(re.compile(said))
    expect(tab.locator("ol.events")).to_contain_text("snoozed")
    entry = AuditEntry.objects.get(action="ticket.snooze")
    assert entry.actor_username == "sam" and entry.object_id == str(ticket.pk)

    tab.get_by_role("link", name="Tickets", exact=True).first.click()
    expect(tab.locator(f"#ticket-{ticket.pk}")).to_have_count(0)
    tab.locator("nav.tabs").get_by_role("link", name=re.compile("^Snoozed")).click()
    row = rf"snoozed until (\d+ \w+ \d+ )?{until:%H:%M} UTC \(in 1 h"
    expect(tab.locator(f"#ticket-{ticket.pk}")).to_contain_text(re.compile(row))

    # Its time passes (moved into the past here): back by itself, with no job run.
    Ticket.objects.filter(pk=ticket.pk).update(snoozed_until=timezone.now() - timedelta(minutes=1))
    tab.goto(f"{live_server.url}/console/tickets/")
    expect(tab.locator(f"#ticket-{ticket.pk}")).to_be_visible()
    highlighted(tab, "Open 1")
    tab.goto(f"{live_server.url}/console/tickets/{ticket.pk}/")
    expect(tab.locator("ol.events .e-woke")).to_contain_text("back in the Open list")
    expect(tab.get_by_role("button", name="Un-snooze")).to_have_count(0)
    tab.context.close()


@pytest.fixture
def bought_and_refund_failing(
    transactional_db: None, shop: Shop, api: Any, lost_messages: MagicMock
) -> Ticket:
    """A run that reserved, ordered and charged in the real shop, then aborted; the
    worker's service undoes it newest first, and the refund fails (a ticket opens)."""
    allow_without_approval("create_order", "charge")
    allow_without_approval("refund", max_attempts=1)
    start_run(api)
    call_ok(api, step_index=1, tool="reserve_stock", args=STOCK)
    email = {"email": "ann.customer@example.com", "currency": "EUR"}
    order = call_ok(
        api, step_index=2, tool="create_order", args={**STOCK, "amount": "19.90", **email}
    )
    charge = {"order_id": order["result"]["order_id"], "amount": "19.90", **email}
    call_ok(api, step_index=3, tool="charge", args=charge)
    shop.fault(REFUND, fail_next=10_000, fail_status=503)
    abort(api)
    work()
    return Ticket.objects.get(compensation__tool="refund")


def work() -> None:
    """What the saga worker does for the run (compensations/tasks.py), in this process."""
    run = Run.objects.get(run_id="r-1")
    while compensation_run_next(run_pk=run.pk):
        pass
    run_conclude(run_pk=run.pk)


def test_the_customer_sentence_before_and_after_the_refund_and_the_contact_link(
    browser: Any,
    live_server: Any,
    django_user_model: Any,
    bought_and_refund_failing: Ticket,
    shop: Shop,
) -> None:
    from playwright.sync_api import expect

    ticket = bought_and_refund_failing
    make_user(django_user_model, "sam", "support")
    tab = open_tab(browser, live_server.url)
    tab.goto(f"{live_server.url}/console/tickets/{ticket.pk}/")

    sentence = tab.locator(".customer-sentence")
    expect(sentence).to_have_text(
        re.compile(
            r"^The customer was charged 19\.90 EUR \(ch_\w+\); the reservation [\w-]+ was "
            r"released; the order ord_\w+ was cancelled; the refund has not been made\.$"
        )
    )
    link = tab.locator("a.contact-link")
    expect(link).to_have_text("ann.customer@example.com")
    expect(link).to_have_attribute("href", "mailto:ann.customer@example.com")
    expect(tab.locator(".what-happened")).to_contain_text("Contact the customer:")
    expect(tab.locator(".last-error")).to_have_text(
        "Last try: the payments service answered 503 (unavailable)."
    )
    assert AuditEntry.objects.filter(action="full_args.read").count() == 1

    shop.fault(REFUND)  # the payments service is healthy again
    tab.evaluate("window.__notReloaded = true")
    tab.get_by_role("button", name="Retry").click()
    expect(tab.locator(".messages")).to_contain_text("Retry queued")
    tab.evaluate("window.__notReloaded = true")
    work()  # the worker's round: the refund is made

    expect(sentence).to_have_text(
        re.compile(
            r"; the order ord_\w+ was cancelled; refunded on \d{1,2} \w{3} \d{4} at \d\d:\d\d UTC "
            r"\(refund re_\w+\)\.$"
        ),
        timeout=10_000,
    )
    assert tab.evaluate("window.__notReloaded") is True  # the live region, not a reload
    # The contact stays, and a refresh is not another look.
    expect(link).to_have_attribute("href", "mailto:ann.customer@example.com")
    assert AuditEntry.objects.filter(action="full_args.read").count() == 2  # the two page loads
    refund = Compensation.objects.get(pk=ticket.compensation_id)
    assert refund.status == Compensation.Status.SUCCEEDED
    tab.screenshot(path=SHOTS / "desk-refunded.png", full_page=True)
    tab.context.close()


@pytest.mark.parametrize("width", [DESKTOP, PHONE])
def test_the_desk_pages_fit_the_screen_with_readable_text_and_big_toggles(
    width: int,
    browser: Any,
    live_server: Any,
    transactional_db: None,
    django_user_model: Any,
    agent_a: Any,
    desk_catalog: Any,
) -> None:
    from playwright.sync_api import expect

    sam = make_user(django_user_model, "sam", "support")
    agent: Agent = agent_a[0]
    ticket = refund_dead_lettered(agent, "demo-20261207-062526-4c06-11-dead-letter-long-run-id")
    other = dead_letter(agent, "r-closed")
    ticket_resolve(ticket=other, by=sam, note="Cancelled in the shop admin.")
    Compensation.objects.filter(pk=ticket.compensation_id).update(
        last_error="circuit open until 2026-12-07T06:30:04Z"
    )
    tab = open_tab(browser, live_server.url, width)
    pages = {
        "tickets": "/console/tickets/?status=all",
        "resolved": "/console/tickets/?tab=resolved",
        "ticket": f"/console/tickets/{ticket.pk}/",
        "closed": f"/console/tickets/{other.pk}/",
    }
    for name, path in pages.items():
        tab.goto(f"{live_server.url}{path}")
        expect(tab.locator("main h1").first).to_be_visible()
        for summary in tab.locator("main details > summary").all():
            if not summary.evaluate("s => s.parentElement.open"):
                summary.click()  # open, so what it holds is measured too
            box = summary.bounding_box()
            assert box["height"] >= 32, (name, summary.inner_text(), box)
        tab.screenshot(path=SHOTS / f"desk-{width}-{name}.png", full_page=True)
        widest, inner = tab.evaluate(f"[{WIDEST}, window.innerWidth]")
        assert widest <= min(inner, width), (name, widest)
        assert tab.evaluate(SMALL_TEXT) == [], name
    tab.context.close()
