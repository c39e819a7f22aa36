"""Approvals end to end: a real ToolOps server, a real Celery worker, the shop over HTTP,
and reviewers in real browsers (Chromium through Playwright). The agent's long-poll gets
the outcome the reviewer decided; racing reviewers make one decision."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from tests.browser import SHOTS, needs_chromium, open_page, open_pages
from tests.conftest import Shop
from tests.console.conftest import PASSWORD, make_user
from tests.waiting import wait_until
from tests.worker import Worker
from toolops.models import Agent, Approval, ApprovalVote, ToolCall

pytestmark = needs_chromium
CHARGE = {"order_id": "ord-9", "amount": "199.00", "currency": "EUR", "customer": "cus_42"}


@pytest.fixture
def reviewers(django_user_model: Any, settings: Any) -> list[Any]:
    from django.conf import global_settings

    # The server process checks passwords with the default hashers.
    settings.PASSWORD_HASHERS = global_settings.PASSWORD_HASHERS
    return [make_user(django_user_model, name, "reviewers") for name in ("rita", "raj")]


@pytest.fixture
def stack(
    worker: Callable[..., Worker], toolops_server: Callable[..., Any], agent_a: tuple[Agent, str]
) -> Iterator[tuple[Any, httpx.Client]]:
    """A worker and a web server sharing one broker, and the agent's HTTP client."""
    w = worker(TOOLOPS_APPROVAL_SWEEP_S="1")
    server = toolops_server(TOOLOPS_DATA_DIR=str(w.data_dir))
    auth = {"Authorization": f"Bearer {agent_a[1]}"}
    with httpx.Client(base_url=server.url, headers=auth, timeout=40) as http:
        yield server, http


def log_in(page: Any, base: str, username: str, next_path: str) -> None:
    page.goto(f"{base}/console/login/?next={next_path}")
    page.get_by_label("User name").fill(username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()


def hold_a_charge(http: httpx.Client) -> dict[str, Any]:
    assert http.post("/api/v1/runs", json={"run_id": "r-1"}).status_code == 201
    response = http.post(
        "/api/v1/runs/r-1/calls", json={"step_index": 0, "tool": "charge", "args": CHARGE}
    )
    assert response.status_code == 202, response.text
    return response.json()


def long_poll(http: httpx.Client, call_id: str, answers: list[dict[str, Any]]) -> threading.Thread:
    """The agent waits for the decision as agents do: long-polls of up to 30 s, on a
    connection of its own (as another process of the agent's would)."""

    def poll() -> None:
        deadline = time.monotonic() + 60
        with httpx.Client(base_url=http.base_url, headers=http.headers, timeout=40) as own:
            while time.monotonic() < deadline:
                try:
                    response = own.get(f"/api/v1/calls/{call_id}", params={"wait": 30})
                except httpx.TransportError:
                    # A dropped connection: the agent pauses, then polls again. Pacing, as
                    # an agent's client paces its retries; the long-poll itself is the
                    # wait, bounded by `deadline`.
                    time.sleep(0.2)
                    continue
                if response.status_code == 200:
                    answers.append(response.json())
                    return

    thread = threading.Thread(target=poll, daemon=True)
    thread.start()
    return thread


def test_a_reviewer_sees_the_charge_arrive_approves_it_and_the_agent_gets_the_outcome(
    stack: tuple[Any, httpx.Client], reviewers: list[Any], shop: Shop
) -> None:
    from playwright.sync_api import expect

    server, http = stack
    with open_page() as page:
        log_in(page, server.url, "rita", "/console/approvals/")
        expect(page.get_by_role("heading", name="Approvals")).to_be_visible()
        expect(page.locator("table.approvals tbody tr.approval-row")).to_have_count(0)
        page.evaluate("window.__notReloaded = true")

        call = hold_a_charge(http)
        assert call["status"] == "pending_approval"
        assert shop.requests("/payments/charges") == []
        answers: list[dict[str, Any]] = []
        poller = long_poll(http, call["call_id"], answers)

        # It appears in the open queue without a reload.
        row = page.locator("table.approvals tbody tr", has_text=call["tool_call_id"])
        expect(row).to_be_visible(timeout=30_000)
        assert page.evaluate("window.__notReloaded") is True
        expect(row).to_contain_text("Charge 199.00 EUR to customer cus_42 for order ord-9")
        page.screenshot(path=SHOTS / "approvals.png", full_page=True)

        # The approval's url (from the API) is the page the reviewer decides on.
        page.goto(f"{server.url}{call['approval']['url']}")
        expect(page.locator("code.tool-call-id")).to_have_text(call["tool_call_id"])
        expect(page.locator("code.run-id")).to_have_text("r-1")
        page.screenshot(path=SHOTS / "approval.png", full_page=True)
        # A charge is released at once: approving it is confirmed, naming it.
        page.get_by_role("button", name="Approve").click()
        page.get_by_role("button", name="Approve: charge 199.00 EUR").click()
        expect(page.locator(".messages")).to_contain_text("Approved")

        poller.join(45)
    assert answers, "the agent's long-poll never got an outcome"
    [outcome] = answers
    assert outcome["status"] == "succeeded", outcome
    assert outcome["approval"]["status"] == "approved"
    assert outcome["approval"]["decided_by"] == "rita"
    # Exactly one charge reached the downstream.
    assert len(shop.requests("/payments/charges")) == 1
    assert shop.state()["counts"]["charges"] == 1


def test_two_reviewers_racing_in_two_browsers_make_one_decision(
    stack: tuple[Any, httpx.Client], reviewers: list[Any], shop: Shop
) -> None:
    from playwright.sync_api import expect

    server, http = stack
    call = hold_a_charge(http)
    url = f"{server.url}{call['approval']['url']}"
    with open_pages(2) as (rita, raj):
        log_in(rita, server.url, "rita", call["approval"]["url"])
        log_in(raj, server.url, "raj", call["approval"]["url"])
        for page in (rita, raj):
            expect(page.get_by_role("button", name="Approve")).to_be_visible()
        raj.get_by_label(re.compile("^Why reject")).fill("Not this customer's order.")
        # Both decisions are on screen; both are submitted at once (rita's approval as
        # confirmed: the confirmation's own field, as its dialog sends it).
        rita.evaluate(
            "() => { document.querySelector('input[name=confirmed]').disabled = false;"
            " document.querySelector('button[value=approve]').click(); }"
        )
        raj.evaluate("document.querySelector('button[value=reject]').click()")
        # Each page has come back from its POST with what it was told.
        said = re.compile("Approved|Rejected|Already decided")
        for page in (rita, raj):
            expect(page.locator(".messages")).to_contain_text(said, timeout=30_000)
        texts = [p.locator(".messages").inner_text() for p in (rita, raj)]

    decisions = [t for t in texts if t.startswith(("Approved", "Rejected"))]
    refused = [t for t in texts if "Already decided" in t]
    assert len(decisions) == 1 and len(refused) == 1, texts
    approval = Approval.objects.get()
    assert approval.status in ("approved", "rejected")
    assert ApprovalVote.objects.count() == 1
    final = ToolCall.objects.get(call_id=call["call_id"])
    if approval.status == "approved":
        # The worker runs it; once it has ended, neither a second delivery nor the sweep
        # can run it again (execution_started_at is set), so the count below is final.
        wait_until(lambda: ToolCall.objects.get(pk=final.pk).status not in ToolCall.WAITING, 60)
        final.refresh_from_db()
        assert final.status == "succeeded"
        assert len(shop.requests("/payments/charges")) == 1
    else:
        # A rejected call is never run: nothing left to wait for.
        assert final.status == "rejected"
        assert shop.requests("/payments/charges") == []
    assert url.endswith(f"{approval.approval_id}/")
