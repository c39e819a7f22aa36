"""The reviewer's keyboard, in a real browser: j/k move through the queue, Enter opens; on
an approval's page no key decides — a and r move the cursor to a note, Esc leaves it — and
Tab to Approve approves a call that can be taken back; in "Why reject", Ctrl+Enter
rejects once confirmed."""

# ruff: noqa: F811

from __future__ import annotations

from typing import Any
from unittest.mock import patch

from tests.browser import needs_chromium, open_page
from tests.console.conftest import (  # noqa: F401 - fixtures shared with the console tests
    PASSWORD,
    console_catalog,
    make_run,
    make_user,
)
from toolops.models import Approval

from .test_console import hold

pytestmark = needs_chromium


def log_in(page: Any, base: str, next_path: str) -> None:
    page.goto(f"{base}/console/login/?next={next_path}")
    page.get_by_label("User name").fill("rita")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()


def test_a_reviewer_moves_by_keys_and_approves_by_tab(
    live_server: Any,
    transactional_db: None,
    django_user_model: Any,
    agent_a: Any,
    console_catalog: Any,
) -> None:
    from playwright.sync_api import expect

    make_user(django_user_model, "rita", "reviewers")
    run = make_run(agent_a[0], "r-keys")
    older = hold(run, "tc-older", age_s=120, reason="policy")
    newer = hold(run, "tc-newer", step_index=4, age_s=60, reason="policy")

    with patch("toolops.tasks.execute_approved_call.delay", autospec=True), open_page() as page:
        log_in(page, live_server.url, "/console/approvals/")
        page.wait_for_selector("table.approvals tbody tr")

        # j, j, k: back on the oldest; Enter opens it.
        for key in ("j", "j", "k"):
            page.keyboard.press(key)
        page.keyboard.press("Enter")
        expect(page.locator("code.tool-call-id")).to_have_text("tc-older")
        page.wait_for_load_state()  # its keys are a deferred script's

        # r puts the cursor in "Why reject"; typed keys are the note's, not shortcuts.
        page.keyboard.press("r")
        page.keyboard.type("a risky one")
        expect(page.locator("#approval-note")).to_have_value("a risky one")
        page.locator("#approval-note").fill("")
        page.keyboard.press("Escape")  # leaves the note: the keys are shortcuts again

        # a, a: the cursor in the approval's note, then an "a" typed there. No decision.
        page.keyboard.press("a")
        page.keyboard.press("a")
        expect(page.locator("#approve-note")).to_have_value("a")
        expect(page.locator("code.tool-call-id")).to_have_text("tc-older")
        assert Approval.objects.get(pk=older.pk).status == "pending"

        # Tab to Approve, Enter: a call that can be taken back is approved at once.
        page.locator("#approve-note").fill("")
        page.keyboard.press("Tab")
        expect(page.get_by_role("button", name="Approve", exact=True)).to_be_focused()
        page.keyboard.press("Enter")
        expect(page.locator(".messages")).to_contain_text("Approved")
        expect(page.locator("code.tool-call-id")).to_have_text("tc-newer")

    assert Approval.objects.get(pk=older.pk).status == "approved"
    assert Approval.objects.get(pk=newer.pk).status == "pending"


def test_ctrl_enter_in_the_reason_rejects_once_confirmed(
    live_server: Any,
    transactional_db: None,
    django_user_model: Any,
    agent_a: Any,
    console_catalog: Any,
) -> None:
    from playwright.sync_api import expect

    make_user(django_user_model, "rita", "reviewers")
    held = hold(make_run(agent_a[0], "r-notes"), "tc-first", reason="policy")

    with open_page() as page:
        log_in(page, live_server.url, f"/console/approvals/{held.approval_id}/")
        expect(page.locator("code.tool-call-id")).to_have_text("tc-first")
        page.wait_for_load_state()  # its keys are a deferred script's

        # r, a reason, Enter: a new line in the reason, never a decision.
        page.keyboard.press("r")
        page.keyboard.type("duplicate order")
        page.keyboard.press("Enter")
        expect(page.locator("#approval-note")).to_have_value("duplicate order\n")

        # Ctrl+Enter asks first; a dismissed confirm sends nothing.
        page.once("dialog", lambda dialog: dialog.dismiss())
        page.keyboard.press("Control+Enter")
        page.keyboard.type("of tc-0")  # had it been sent, the reason would lack this
        expect(page.locator("#approval-note")).to_have_value("duplicate order\nof tc-0")
        page.once("dialog", lambda dialog: dialog.accept())
        page.keyboard.press("Control+Enter")
        expect(page.locator(".messages")).to_contain_text("Rejected")

    rejected = Approval.objects.get(pk=held.pk)
    # (A form sends a new line as CR LF.)
    assert rejected.status == "rejected"
    assert rejected.note.replace("\r\n", "\n") == "duplicate order\nof tc-0"
