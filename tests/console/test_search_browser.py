"""The search by what a person has, in a real browser (Chromium through Playwright),
against a real ToolOps server and the shop over HTTP: a customer's e-mail typed into the
navigation's search box lists the runs that ordered for them, at a desk's width and at a
phone's, the results' table scrolling inside its card."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

from tests.browser import SHOTS, needs_chromium, open_page
from tests.conftest import Shop
from tests.console.conftest import PASSWORD, make_user
from tests.toolops.executor.helpers import allow_without_approval
from toolops.models import Agent

pytestmark = needs_chromium


@pytest.fixture
def rita(django_user_model: Any, settings: Any) -> Any:
    from django.conf import global_settings

    # The server process checks the password with the default hashers.
    settings.PASSWORD_HASHERS = global_settings.PASSWORD_HASHERS
    return make_user(django_user_model, "rita", "reviewers")


@pytest.mark.parametrize("width", [1400, 390])
def test_a_customers_email_in_the_search_box_lists_their_runs(
    toolops_server: Callable[..., Any],
    shop: Shop,
    rita: Any,
    agent_a: tuple[Agent, str],
    width: int,
) -> None:
    from playwright.sync_api import expect

    allow_without_approval("create_order")
    server = toolops_server(REDIS_URL="")
    auth = {"Authorization": f"Bearer {agent_a[1]}"}
    with httpx.Client(base_url=server.url, headers=auth, timeout=30) as http:
        for run_id, email in (
            ("r-ann-1", "ann@example.com"),
            ("r-ann-2", "ann@example.com"),
            ("r-bob", "bob@example.com"),
        ):
            assert http.post("/api/v1/runs", json={"run_id": run_id}).status_code == 201
            order = http.post(
                f"/api/v1/runs/{run_id}/calls",
                json={
                    "step_index": 0,
                    "tool": "create_order",
                    "args": {"sku": "A12", "qty": 1, "amount": "89.00", "email": email},
                },
            )
            assert order.json()["status"] == "succeeded", order.text

    with open_page() as page:
        page.set_viewport_size({"width": width, "height": 900})
        page.goto(f"{server.url}/console/login/?next=/console/")
        page.get_by_label("User name").fill("rita")
        page.get_by_label("Password").fill(PASSWORD)
        page.get_by_role("button", name="Log in").click()
        if width < 760:  # on a phone the search box sits behind the header's Menu button
            page.get_by_role("button", name="Menu").click()
        box = page.get_by_role("searchbox", name="Find by id")
        box.fill("Ann@Example.com")
        box.press("Enter")

        group = page.locator(".search-group")
        expect(group.get_by_role("heading")).to_have_text("An e-mail address in 2 runs")
        expect(group.get_by_role("link", name="r-ann-1")).to_be_visible()
        expect(group.get_by_role("link", name="r-ann-2")).to_be_visible()
        expect(group).not_to_contain_text("r-bob")
        expect(group.get_by_text("e-mail (matched privately) in call create_order")).to_have_count(
            2
        )
        page.screenshot(path=str(SHOTS / f"search-email-{width}.png"), full_page=True)
        # The card fits the viewport; a table wider than it scrolls inside the card.
        right = group.evaluate("(card) => card.getBoundingClientRect().right")
        assert right <= width

        group.get_by_role("link", name="r-ann-2").click()
        expect(page.get_by_role("heading", name="Run r-ann-2")).to_be_visible()
