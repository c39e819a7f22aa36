"""/console/audit/ in a real browser (Chromium through Playwright): an operator aborts a
run, finds the abort in the audit log through the nav and the filter form, and follows
its link back to the run."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from tests.browser import needs_chromium, open_page

from .conftest import PASSWORD, make_run, make_user

pytestmark = needs_chromium


@pytest.fixture
def browser_page(live_server: Any) -> Iterator[Any]:
    with open_page() as page:
        yield page


def test_an_operator_finds_an_abort_in_the_audit_log(
    live_server: Any,
    transactional_db: None,
    django_user_model: Any,
    agent_a: Any,
    browser_page: Any,
) -> None:
    from django.db import transaction
    from playwright.sync_api import expect

    from toolops.audit.models import AuditEntry
    from toolops.audit.services import Action, Ref, audit_record

    make_user(django_user_model, "olga", "operators")
    support = make_user(django_user_model, "sam", "support")
    run = make_run(agent_a[0], "r-audit")
    with transaction.atomic():
        audit_record(
            actor=support,
            action=Action.TICKET_COMMENT,
            obj=Ref("ticket", "3"),
            summary="Called the shop.",
        )
    page = browser_page
    violations: list[str] = []
    page.on("console", lambda m: violations.append(m.text) if "Policy" in m.text else None)

    page.goto(f"{live_server.url}/console/runs/{run.pk}/")
    page.get_by_label("User name").fill("olga")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.get_by_label("Reason").fill("customer called to cancel")
    page.get_by_label("I understand this cannot be taken back").check()
    page.once("dialog", lambda dialog: dialog.accept())  # console.js asks once more
    page.get_by_role("button", name="Abort run").click()
    expect(page.locator(".messages")).to_be_visible()

    page.get_by_role("link", name="Audit log").click()
    rows = page.locator("table.audit tbody tr")
    expect(rows).to_have_count(3)  # with agent-a's token.create
    expect(rows.first).to_contain_text("run.abort")
    expect(rows.first).to_contain_text("customer called to cancel")

    page.get_by_label("Action").select_option("ticket.comment")
    page.get_by_role("button", name="Filter").click()
    expect(page).to_have_url(re.compile(r"action=ticket\.comment"))
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("Called the shop.")

    page.get_by_role("link", name="Clear").click()
    rows.first.get_by_role("link", name="r-audit").click()
    expect(page).to_have_url(re.compile(rf"/console/runs/{run.pk}/$"))
    assert AuditEntry.objects.filter(action="run.abort", actor__username="olga").count() == 1
    assert violations == []  # no Content Security Policy report on the way
