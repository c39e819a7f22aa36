"""The run page as a support person reads it, in a real browser (Chromium through
Playwright) at 390 px (a phone, by touch) and at 1400 px, on a realistic aborted run: a
purchase whose order and charge a reviewer approved, made through the API against the
shop over HTTP, then abandoned by its agent while the payments service was down. A real
Celery worker ran the approved calls and the undos (the refund failed and opened a
ticket; support retried it and it went through): seven calls, four of them undo calls.

On the phone each call is one line, and the page is short; a tap opens a call. At both
widths the plain summary comes first, no page scrolls sideways, the approval reads in the
past tense with the catalog's words for undoing, and no jargon (compensation, fence,
idempotency, spans, "~undo:c-…" ids …) is visible outside the Technical details."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any
from unittest.mock import patch

import pytest
from rest_framework.test import APIClient

from compensations.desk import ticket_retry
from compensations.models import Compensation, Ticket
from tests.browser import DESKTOP, PHONE, SHOTS, WIDEST, needs_chromium, open_page
from tests.conftest import Shop
from tests.console.conftest import PASSWORD, make_user
from tests.toolops.executor.helpers import call_ok, post_call, start_run
from tests.worker import Worker, wait_for
from toolops.approvals.services import approval_decide
from toolops.models import Approval, Run, ToolCall

pytestmark = needs_chromium
# 7 calls, all folded: a phone's screen or two, where the page was once 4,517 px tall.
PHONE_HEIGHT_MAX = 1600
# What a support person should not have to read outside "Technical details".
JARGON = re.compile(
    r"compensation|fence|idempoten|\blease\b|\bspans?\b|~undo|trace_id|session_key|"
    r"call_id|dead.letter|\bround\b",
    re.I,
)
# The page's visible text without its technical disclosures.
VISIBLE_PLAIN = (
    "() => { document.querySelectorAll('details.technical').forEach((d) => d.remove());"
    " return document.querySelector('main').innerText; }"
)
REFUND = "/payments/refunds"
ORDER = {"sku": "A12", "qty": 1, "amount": "89.00", "currency": "EUR", "customer": "cus_42"}
# The worker sweeps for approved calls and undos whose messages were lost (these are).
FAST = {
    "TOOLOPS_APPROVAL_SWEEP_S": "0.5",
    "TOOLOPS_APPROVAL_GRACE_S": "1",
    "TOOLOPS_COMPENSATION_SWEEP_S": "0.5",
    "TOOLOPS_COMPENSATION_GRACE_S": "1",
}
SETTLE_S = 45.0


@pytest.fixture
def lost_messages() -> Iterator[None]:
    """Messages from this process reach no broker: the worker's sweeps find the work."""
    from compensations.tasks import compensate_run

    with (
        patch.object(compensate_run, "delay", autospec=True),
        patch("toolops.tasks.execute_approved_call.delay", autospec=True),
    ):
        yield


def approved(api: APIClient, w: Worker, rita: Any, **call: Any) -> dict[str, Any]:
    """A call held for approval, approved by rita and run by the worker."""
    held = post_call(api, "r-support", **call)
    assert held.status_code == 202, held.content
    approval = Approval.objects.get(status="pending")
    approval_decide(approval=approval, by=rita, approve=True, note="", args_hash=approval.args_hash)
    done = ToolCall.objects.filter(call_id=held.json()["call_id"], status="succeeded")
    wait_for(done.exists, SETTLE_S, w)
    return api.get(f"/api/v1/calls/{held.json()['call_id']}").json()


@pytest.fixture
def scene(
    worker: Callable[..., Worker],
    api: APIClient,
    shop: Shop,
    django_user_model: Any,
    settings: Any,
    lost_messages: None,
) -> SimpleNamespace:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    rita = make_user(django_user_model, "rita", "reviewers")
    sam = make_user(django_user_model, "sam", "support")
    w = worker(**FAST)
    start_run(api, "r-support")
    call_ok(api, "r-support", step_index=1, tool="reserve_stock", args={"sku": "A12", "qty": 1})
    order = approved(api, w, rita, step_index=2, tool="create_order", args=ORDER)
    charge_args = {"order_id": order["result"]["order_id"], **ORDER}
    del charge_args["sku"], charge_args["qty"]
    charge = approved(api, w, rita, step_index=3, tool="charge", args=charge_args)
    # The agent gives up while the payments service is down: the refund fails all its
    # attempts, is dead-lettered and opens a ticket; the other undos go through.
    shop.fault(REFUND, fail_next=3, fail_status=503)
    abort = api.post("/api/v1/runs/r-support/abort", {"reason": "customer left"}, format="json")
    assert abort.status_code == 202, abort.content
    run = Run.objects.get(run_id="r-support")
    wait_for(lambda: Run.objects.get(pk=run.pk).status == "compensation_failed", SETTLE_S, w)
    # Support retries it once the service is back: the second round refunds.
    ticket = Ticket.objects.get()
    ticket_retry(ticket=ticket, by=sam)
    wait_for(lambda: Run.objects.get(pk=run.pk).status == "aborted", SETTLE_S, w)
    assert Compensation.objects.get(tool="refund").rounds == 2
    assert run.calls.count() == 7
    return SimpleNamespace(run=run, ticket=ticket, order=order, charge=charge)


def log_in(page: Any, base: str, path: str) -> None:
    page.goto(f"{base}/console/login/?next={path}")
    page.get_by_label("User name").fill("sam")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"**{path}")


def expected_story(scene: SimpleNamespace) -> str:
    order_id = scene.order["result"]["order_id"]
    charge_id = scene.charge["result"]["charge_id"]
    reservation = ToolCall.objects.get(tool="reserve_stock").result["reservation_id"]
    return (
        "Aborted by the agent after 3 calls, all done: Reserve 1 × A12; "
        "Order 1 × A12 for 89.00 EUR (customer cus_42); "
        f"Charge 89.00 EUR to customer cus_42 for order {order_id}. "
        f"ToolOps undid all 3 (Refund charge {charge_id}, after support ticket #{scene.ticket.pk}; "
        f"Cancel order {order_id}; Release stock reservation {reservation})."
    )


def assert_reads_plainly(page: Any, scene: SimpleNamespace) -> None:
    """The summary first, the approval in words, no jargon outside Technical details."""
    from playwright.sync_api import expect

    expect(page.locator(".run-head .story")).to_have_text(expected_story(scene))
    charge = page.locator(f"#call-{scene.charge['call_id']}")
    expect(charge.locator(".approval-line")).to_contain_text(
        re.compile(r"Approved by rita at \d\d:\d\d:\d\d — undone only by refund\.")
    )
    expect(charge.locator(".approval-line")).not_to_contain_text("cannot be undone")
    # Everything a person can open short of Technical details is opened: on a phone each
    # folded call (by a tap), and every call's tries.
    if page.viewport_size["width"] == PHONE:
        folded = page.locator(".waterfall tbody.call:not(.open)")
        for call_id in folded.evaluate_all("(calls) => calls.map((c) => c.id)"):
            page.locator(f"#{call_id} > tr.call-row").tap()
    page.evaluate(
        "() => document.querySelectorAll('details:not(.technical)').forEach((d) => d.open = true)"
    )
    text = page.evaluate(VISIBLE_PLAIN)
    assert "Undo of step 3: Refund charge" in text
    assert JARGON.findall(text) == [], text
    assert page.evaluate(WIDEST) <= page.viewport_size["width"]


def test_an_aborted_run_reads_plainly_and_fits_a_phone(
    scene: SimpleNamespace, live_server: Any
) -> None:
    from playwright.sync_api import expect

    path = f"/console/runs/{scene.run.pk}/"
    with open_page() as desk:
        # A phone: touch, 390 px, in the same browser.
        phone = desk.context.browser.new_context(
            viewport={"width": PHONE, "height": 844}, is_mobile=True, has_touch=True
        ).new_page()
        desk.set_viewport_size({"width": DESKTOP, "height": 1000})
        for page in (phone, desk):
            log_in(page, live_server.url, path)

        calls = phone.locator(".waterfall tbody.call")
        expect(calls).to_have_count(7)
        # Folded: a line per call, its tries and details hidden; the page is short.
        expect(phone.locator(".waterfall tr.call-more").first).to_be_hidden()
        expect(phone.locator(".waterfall .call-bar").first).to_be_hidden()
        for line in phone.locator(".waterfall tr.call-row").all():
            assert line.bounding_box()["height"] < 60, line.inner_text()
        height = phone.evaluate("document.documentElement.scrollHeight")
        phone.screenshot(path=SHOTS / "timeline-phone-folded.png", full_page=True)
        assert height < PHONE_HEIGHT_MAX, f"{height} px tall"
        assert phone.evaluate(WIDEST) <= PHONE
        assert JARGON.findall(phone.evaluate(VISIBLE_PLAIN)) == []
        phone.reload()

        # A tap on the failed refund's line opens it: its tries, what went wrong, its
        # ticket, in words; another tap folds it again.
        refund = phone.locator("tbody.call.undo[data-status='failed']")
        refund.locator("tr.call-row").tap()
        expect(refund.locator(".call-toggle")).to_have_attribute("aria-expanded", "true")
        expect(refund.locator("tr.attempt-row").first).to_be_visible()
        charge_id = scene.charge["result"]["charge_id"]
        expect(refund.locator(".undo-line")).to_contain_text(
            f"Undo of step 3: Refund charge {charge_id} — failed (try 1) · "
            f"support ticket #{scene.ticket.pk} (closed)."
        )
        expect(refund.locator(".error-line")).to_contain_text(
            "the payments service answered 503 (unavailable)"
        )
        # Its ids are there, folded under Technical details.
        technical = refund.locator("tr.call-more details.technical").last
        expect(technical.locator("code", has_text="~undo:")).to_be_hidden()
        technical.locator("> summary").tap()
        expect(technical.locator("code", has_text="~undo:").first).to_be_visible()
        phone.screenshot(path=SHOTS / "timeline-phone-opened.png", full_page=True)
        refund.locator("tr.call-row").tap()
        expect(refund.locator("tr.call-more")).to_be_hidden()
        # The charge, opened: its approval in the past tense.
        phone.locator(f"#call-{scene.charge['call_id']} tr.call-row").tap()
        assert_reads_plainly(phone, scene)

        # A desktop keeps the waterfall: every call open, its bars placed.
        expect(desk.locator(".waterfall .call-bar").first).to_be_visible()
        assert desk.locator(".waterfall .call-bar").first.evaluate("(e) => e.style.width")
        expect(desk.locator(".waterfall tr.call-more").first).to_be_visible()
        expect(desk.locator(".call-toggle").first).to_be_hidden()
        desk.screenshot(path=SHOTS / "timeline-desktop.png", full_page=True)
        assert_reads_plainly(desk, scene)
        phone.context.close()
