"""The reviewer's keyboard, in a real browser: j/k move through the queue, Enter opens,
a then a approves; r goes to the reject note, where Ctrl+Enter rejects once confirmed, and
a note typed for one decision is never sent with the other."""

from __future__ import annotations

from typing import Any
from unittest.mock import patch

from tests.browser import needs_chromium, open_page
from tests.console.conftest import PASSWORD, make_run, make_user
from toolops.models import Approval

from .test_console import hold

pytestmark = needs_chromium


def test_a_reviewer_decides_from_the_keyboard(
    live_server: Any, transactional_db: None, django_user_model: Any, agent_a: Any
) -> None:
    from playwright.sync_api import expect

    make_user(django_user_model, "rita", "reviewers")
    run = make_run(agent_a[0], "r-keys")
    older = hold(run, "tc-older", age_s=120)
    newer = hold(run, "tc-newer", step_index=4, age_s=60)

    with patch("toolops.tasks.execute_approved_call.delay", autospec=True), open_page() as page:
        page.goto(f"{live_server.url}/console/login/?next=/console/approvals/")
        page.get_by_label("User name").fill("rita")
        page.get_by_label("Password").fill(PASSWORD)
        page.get_by_role("button", name="Log in").click()
        page.wait_for_selector("table.approvals tbody tr")

        # j, j, k: back on the oldest; Enter opens it.
        for key in ("j", "j", "k"):
            page.keyboard.press(key)
        page.keyboard.press("Enter")
        expect(page.locator("code.tool-call-id")).to_have_text("tc-older")

        # r puts the cursor in the note; typed keys are the note's, not shortcuts.
        page.keyboard.press("r")
        page.keyboard.type("a risky one")
        expect(page.locator("#approval-note")).to_have_value("a risky one")
        page.locator("#approval-note").fill("")
        page.keyboard.press("Escape")  # leaves the note: the keys are shortcuts again

        # a, a: approved, and on to the next one waiting.
        page.keyboard.press("a")
        page.keyboard.press("a")
        expect(page.locator(".messages")).to_contain_text("Approved")
        expect(page.locator("code.tool-call-id")).to_have_text("tc-newer")

    assert Approval.objects.get(pk=older.pk).status == "approved"
    assert Approval.objects.get(pk=newer.pk).status == "pending"


def test_a_note_never_rides_along_with_the_other_decision(
    live_server: Any, transactional_db: None, django_user_model: Any, agent_a: Any
) -> None:
    from playwright.sync_api import expect

    make_user(django_user_model, "rita", "reviewers")
    run = make_run(agent_a[0], "r-notes")
    first = hold(run, "tc-first", age_s=120)
    second = hold(run, "tc-second", step_index=4, age_s=60)

    with patch("toolops.tasks.execute_approved_call.delay", autospec=True), open_page() as page:
        page.goto(f"{live_server.url}/console/login/?next=/console/approvals/{first.approval_id}/")
        page.get_by_label("User name").fill("rita")
        page.get_by_label("Password").fill(PASSWORD)
        page.get_by_role("button", name="Log in").click()
        expect(page.locator("code.tool-call-id")).to_have_text("tc-first")

        # r, a note, Enter: a new line in the note, never a decision.
        page.keyboard.press("r")
        page.keyboard.type("wrong customer")
        page.keyboard.press("Enter")
        expect(page.locator("#approval-note")).to_have_value("wrong customer\n")
        expect(page.locator("code.tool-call-id")).to_have_text("tc-first")

        # Changing one's mind: Esc, a, a approves, without the note typed to reject.
        page.keyboard.press("Escape")
        page.keyboard.press("a")
        page.keyboard.press("a")
        expect(page.locator(".messages")).to_contain_text("Approved")
        expect(page.locator("code.tool-call-id")).to_have_text("tc-second")

        # The reject key: r, the reason, Ctrl+Enter; a dismissed confirm sends nothing.
        page.keyboard.press("r")
        page.keyboard.type("duplicate order")
        page.once("dialog", lambda dialog: dialog.dismiss())
        page.keyboard.press("Control+Enter")
        page.keyboard.type(" of tc-first")  # had it been sent, the note would lack this
        expect(page.locator("#approval-note")).to_have_value("duplicate order of tc-first")
        page.once("dialog", lambda dialog: dialog.accept())
        page.keyboard.press("Control+Enter")
        expect(page.locator(".messages")).to_contain_text("Rejected")

    approved, rejected = Approval.objects.get(pk=first.pk), Approval.objects.get(pk=second.pk)
    assert (approved.status, approved.note) == ("approved", "")
    assert (rejected.status, rejected.note) == ("rejected", "duplicate order of tc-first")
