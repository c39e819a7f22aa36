"""Approving only on purpose, in a real browser (Chromium through Playwright), at 1400 px
and on a 390 px phone: no key, and no key pressed with the focus nowhere, approves a
charge; the confirmation names the charge and starts on Cancel; a reason typed to reject
is never dropped; and after a decision the next approval says it is the next, marking
what differs from the one just decided."""

# ruff: noqa: F811

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any
from unittest.mock import patch

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
from tests.console.conftest import (  # noqa: F401 - fixtures shared with the console tests
    PASSWORD,
    fast_password_hashing,
    make_run,
    make_user,
)
from tests.console.facts_catalog import CHARGE, facts_catalog  # noqa: F401
from toolops.approvals.models import Approval, ApprovalVote

from .test_console import hold

pytestmark = needs_chromium
WIDTHS = [pytest.param(DESKTOP, id="1400"), pytest.param(PHONE, id="390")]
REASON = "the amount looks wrong"


@pytest.fixture
def charges(
    transactional_db: None, django_user_model: Any, agent_a: Any, facts_catalog: Any
) -> list[Approval]:
    """Three charges waiting for rita, oldest first; they differ by order and amount."""
    make_user(django_user_model, "rita", "reviewers")
    run = make_run(agent_a[0], "r-charges")
    held = []
    for n, amount in ((1, "89.00"), (2, "89.00"), (3, "12.50")):
        args = {**CHARGE, "order_id": f"ord_{n}", "amount": amount}
        held.append(hold(run, f"tc-{n}", "charge", args, step_index=n, age_s=300 - 60 * n))
    return held


@pytest.fixture
def executed() -> Iterator[Any]:
    """The worker's queue: an approved call is handed to it, never run here."""
    with patch("toolops.tasks.execute_approved_call.delay", autospec=True) as delay:
        yield delay


def open_tab(browser: Any, width: int, **extra: Any) -> Any:
    tab = browser.new_context(**CONTEXTS[width], **extra).new_page()
    tab.set_default_timeout(TIMEOUT_MS)
    return tab


def log_in(tab: Any, base: str, next_path: str) -> None:
    tab.goto(f"{base}/console/login/?next={next_path}")
    tab.get_by_label("User name").fill("rita")
    tab.get_by_label("Password").fill(PASSWORD)
    tab.get_by_role("button", name="Log in").click()
    # Landed (the login page's own URL ends with `next` too), its scripts loaded.
    tab.wait_for_url(lambda at: "/login/" not in at and at.endswith(next_path))


def decisions_posted(tab: Any) -> list[str]:
    """The decide POSTs this tab sends, as they are sent."""
    sent: list[str] = []
    tab.on("request", lambda r: sent.append(r.url) if r.url.endswith("/decide/") else None)
    return sent


def still_pending(approval: Approval) -> None:
    approval.refresh_from_db()
    assert approval.status == Approval.Status.PENDING
    assert not ApprovalVote.objects.filter(approval=approval).exists()


def fits(tab: Any, width: int) -> None:
    assert tab.evaluate(WIDEST) <= width


@pytest.mark.parametrize("width", WIDTHS)
def test_no_key_approves_a_charge(
    browser: Any, live_server: Any, charges: list[Approval], executed: Any, width: int
) -> None:
    from playwright.sync_api import expect

    first = charges[0]
    tab = open_tab(browser, width)
    log_in(tab, live_server.url, f"/console/approvals/{first.approval_id}/")
    sent = decisions_posted(tab)
    note, reason = tab.locator("#approve-note"), tab.locator("#approval-note")

    # `a` then space, the focus nowhere: the cursor goes to the approval's note, and the
    # space is typed there.
    tab.keyboard.press("a")
    tab.keyboard.press(" ")
    expect(note).to_be_focused()
    expect(note).to_have_value(" ")
    note.fill("")
    tab.keyboard.press("Escape")
    expect(note).not_to_be_focused()

    # Typing into nothing: a note, never a decision.
    tab.keyboard.type("a bad amount")
    expect(note).to_have_value(" bad amount")
    note.fill("")
    tab.keyboard.press("Escape")

    # A reason typed to reject, Esc, `a`, Enter: the reason stays, nothing is decided.
    reason.click()
    tab.keyboard.type(REASON)
    tab.keyboard.press("Escape")
    expect(reason).not_to_be_focused()
    expect(reason).to_have_value(REASON)
    tab.keyboard.press("a")
    tab.keyboard.press("Enter")
    expect(note).to_have_value("\n")
    expect(reason).to_have_value(REASON)
    expect(tab.locator("dialog[open]")).to_have_count(0)

    assert sent == []
    still_pending(first)
    assert tab.url.endswith(f"/console/approvals/{first.approval_id}/")
    fits(tab, width)
    tab.screenshot(path=SHOTS / f"approval-keys-{width}.png", full_page=True)
    tab.context.close()


@pytest.mark.parametrize("width", WIDTHS)
def test_the_confirmation_starts_on_cancel_and_tab_enter_approves(
    browser: Any, live_server: Any, charges: list[Approval], executed: Any, width: int
) -> None:
    from playwright.sync_api import expect

    first, second = charges[0], charges[1]
    tab = open_tab(browser, width)
    log_in(tab, live_server.url, f"/console/approvals/{first.approval_id}/")
    sent = decisions_posted(tab)
    approve = tab.get_by_role("button", name="Approve", exact=True)
    dialog = tab.locator("dialog#confirm-approve")
    cancel = dialog.get_by_role("button", name="Cancel")

    # Enter, and space, right after the confirmation opens: cancelled.
    for key in ("Enter", " "):
        approve.click()
        expect(dialog).to_be_visible()
        expect(cancel).to_be_focused()
        tab.keyboard.press(key)
        expect(dialog).to_be_hidden()
    assert sent == []
    still_pending(first)

    # It names the charge, its customer, and whether it can be undone.
    approve.click()
    expect(dialog.get_by_role("heading")).to_have_text(
        "Charge 89.00 EUR to customer cus_42 for order ord_1?"
    )
    expect(dialog).to_contain_text("Only refund can undo charge")
    fits(tab, width)
    tab.screenshot(path=SHOTS / f"approval-confirm-{width}.png", full_page=True)
    # Tab to the confirmation, Enter: approved, and on to the next one.
    tab.keyboard.press("Tab")
    confirm = dialog.get_by_role("button", name="Approve: charge 89.00 EUR")
    expect(confirm).to_be_focused()
    tab.keyboard.press("Enter")

    tab.wait_for_url(f"**/console/approvals/{second.approval_id}/?after={first.approval_id}")
    banner = tab.locator(".messages")
    expect(banner).to_contain_text("Approved “Charge 89.00 EUR to customer cus_42 for order ord_1”")
    expect(banner).to_contain_text("next: 1 of 2 waiting")
    # The next charge looks like the last: what differs is marked.
    expect(tab.locator("h1 .action mark")).to_have_text("ord_2")
    expect(tab.locator(".call-facts .changed dt")).to_have_text(["Order id"])
    expect(tab.locator(".after-decision")).to_contain_text("its order id differs")
    fits(tab, width)
    tab.screenshot(path=SHOTS / f"approval-next-{width}.png", full_page=True)
    first.refresh_from_db()
    assert (first.status, first.decided_by.username) == ("approved", "rita")
    executed.assert_called_once_with(first.pk)
    still_pending(second)
    tab.context.close()


@pytest.mark.parametrize("width", WIDTHS)
def test_a_reason_typed_to_reject_then_approve_asks_which_was_meant(
    browser: Any, live_server: Any, charges: list[Approval], executed: Any, width: int
) -> None:
    from playwright.sync_api import expect

    first, second, third = charges
    tab = open_tab(browser, width)
    log_in(tab, live_server.url, f"/console/approvals/{first.approval_id}/")
    which = tab.locator("dialog#which-decision")
    approve = tab.get_by_role("button", name="Approve", exact=True)

    # Asked: the reason is quoted, the focus on Cancel, which keeps both texts.
    tab.locator("#approve-note").fill("checked with the customer")
    tab.locator("#approval-note").fill(REASON)
    approve.click()
    expect(which).to_be_visible()
    expect(which).to_contain_text(f"You typed a reason to reject: “{REASON}”")
    expect(which.get_by_role("button", name="Cancel")).to_be_focused()
    fits(tab, width)
    tab.keyboard.press("Enter")
    expect(which).to_be_hidden()
    expect(tab.locator("#approval-note")).to_have_value(REASON)
    expect(tab.locator("#approve-note")).to_have_value("checked with the customer")
    still_pending(first)

    # "Reject with this reason": rejected, with it.
    approve.click()
    which.get_by_role("button", name="Reject with this reason").click()
    tab.wait_for_url(f"**/console/approvals/{second.approval_id}/?after={first.approval_id}")
    expect(tab.locator(".messages")).to_contain_text("Rejected")
    first.refresh_from_db()
    assert (first.status, first.note) == ("rejected", REASON)

    # "Approve anyway": the confirmation follows; the reason is not kept anywhere.
    tab.locator("#approval-note").fill("typo")
    approve.click()
    which.get_by_role("button", name=re.compile("^Approve anyway")).click()
    confirm = tab.locator("dialog#confirm-approve")
    expect(confirm).to_be_visible()
    expect(confirm.get_by_role("button", name="Cancel")).to_be_focused()
    confirm.get_by_role("button", name="Approve: charge 89.00 EUR").click()
    tab.wait_for_url(f"**/console/approvals/{third.approval_id}/?after={second.approval_id}")
    expect(tab.locator(".messages")).to_contain_text("next: 1 of 1 waiting")
    # 12.50 where the last one was 89.00: the amount differs, and the order.
    expect(tab.locator("h1 .action mark")).to_have_text(["12.50", "ord_3"])
    second.refresh_from_db()
    assert (second.status, second.note) == ("approved", "")
    assert "typo" not in ApprovalVote.objects.get(approval=second).note
    tab.context.close()


def test_an_outside_suite_clicks_approve_then_a_button_named_approve(
    browser: Any, live_server: Any, charges: list[Approval], executed: Any
) -> None:
    from playwright.sync_api import expect

    first = charges[0]
    tab = open_tab(browser, DESKTOP)
    log_in(tab, live_server.url, f"/console/approvals/{first.approval_id}/")

    tab.get_by_role("button", name="Approve").click()
    tab.get_by_role("button", name=re.compile("^(Approve|Yes)")).click()

    expect(tab.locator(".messages")).to_contain_text("Approved")
    first.refresh_from_db()
    assert first.status == Approval.Status.APPROVED
    tab.context.close()


@pytest.mark.parametrize("width", WIDTHS)
def test_without_javascript_the_server_asks_the_same(
    browser: Any, live_server: Any, charges: list[Approval], executed: Any, width: int
) -> None:
    from playwright.sync_api import expect

    first, second = charges[0], charges[1]
    tab = open_tab(browser, width, java_script_enabled=False)
    log_in(tab, live_server.url, f"/console/approvals/{first.approval_id}/")
    tab.locator("#approve-note").fill("ok by phone")

    # Approve: a page that asks, its focus on Cancel; Enter there goes back, nothing
    # decided, the note typed given back.
    tab.get_by_role("button", name="Approve", exact=True).click()
    expect(tab.get_by_role("heading", level=1)).to_have_text(
        "Charge 89.00 EUR to customer cus_42 for order ord_1?"
    )
    expect(tab.get_by_role("link", name="Cancel")).to_be_focused()
    fits(tab, width)
    tab.screenshot(path=SHOTS / f"approval-confirm-page-{width}.png", full_page=True)
    tab.keyboard.press("Enter")
    tab.wait_for_url(f"**/console/approvals/{first.approval_id}/")
    expect(tab.locator("#approve-note")).to_have_value("ok by phone")
    still_pending(first)

    tab.get_by_role("button", name="Approve", exact=True).click()
    tab.get_by_role("button", name="Approve: charge 89.00 EUR").click()
    tab.wait_for_url(f"**/console/approvals/{second.approval_id}/?after={first.approval_id}")
    expect(tab.locator(".messages")).to_contain_text("next: 1 of 2 waiting")
    first.refresh_from_db()
    assert (first.status, first.note) == ("approved", "ok by phone")
    tab.context.close()
