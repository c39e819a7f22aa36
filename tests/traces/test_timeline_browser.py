"""The run timeline in a real browser (Chromium through Playwright), against a real ToolOps
server and the shop over HTTP: a running run's page shows a call the agent makes without a
reload — told over Channels with REDIS_URL set, by polling without — and a tool_call_id
typed into the navigation's search box lands on the call, on its run's page."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from tests.browser import SHOTS, needs_chromium, open_page
from tests.conftest import Shop
from tests.console.conftest import PASSWORD, make_user
from tests.redisdb import redis_url
from toolops.models import Agent, Run, ToolCall

pytestmark = needs_chromium
REDIS_URL = redis_url()  # this test worker's own database


@pytest.fixture
def rita(django_user_model: Any, settings: Any) -> Any:
    from django.conf import global_settings

    # The server process checks the password with the default hashers.
    settings.PASSWORD_HASHERS = global_settings.PASSWORD_HASHERS
    return make_user(django_user_model, "rita", "reviewers")


@pytest.fixture
def page() -> Iterator[Any]:
    with open_page() as tab:
        # Keep the page's WebSockets at hand, so that a test can drop them.
        tab.add_init_script(
            "window.__sockets = []; const Native = window.WebSocket;"
            "window.WebSocket = function (url) {"
            "  const socket = new Native(url); window.__sockets.push(socket); return socket; };"
        )
        yield tab


def log_in(page: Any, base: str, next_path: str) -> None:
    page.goto(f"{base}/console/login/?next={next_path}")
    page.get_by_label("User name").fill("rita")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()


def agent_http(server: Any, agent: tuple[Agent, str]) -> httpx.Client:
    auth = {"Authorization": f"Bearer {agent[1]}"}
    return httpx.Client(base_url=server.url, headers=auth, timeout=30)


def call(http: httpx.Client, run_id: str, **body: Any) -> dict[str, Any]:
    response = http.post(f"/api/v1/runs/{run_id}/calls", json=body)
    assert response.status_code == 200, response.text
    return response.json()


@pytest.mark.parametrize(
    "live",
    [
        "poll",
        pytest.param(
            "push",
            marks=pytest.mark.skipif(
                not REDIS_URL, reason="TOOLOPS_TEST_REDIS_URL is not set (.ci/run sets it)"
            ),
        ),
    ],
)
def test_a_running_runs_timeline_shows_a_new_call_without_a_reload(
    live: str,
    toolops_server: Callable[..., Any],
    shop: Shop,
    rita: Any,
    agent_a: tuple[Agent, str],
    page: Any,
) -> None:
    from playwright.sync_api import expect

    # Without REDIS_URL there is no layer shared between processes: the page polls.
    server = toolops_server(REDIS_URL=REDIS_URL if live == "push" else "")
    with agent_http(server, agent_a) as http:
        assert http.post("/api/v1/runs", json={"run_id": "r-live"}).status_code == 201
        first = call(
            http,
            "r-live",
            step_index=0,
            tool="query_stock",
            args={"sku": "A12"},
            tool_call_id="tc-stock",
        )
        assert first["status"] == "succeeded"
        run = Run.objects.get(run_id="r-live")
        requests: list[str] = []
        page.on("request", lambda r: requests.append(r.url))

        log_in(page, server.url, f"/console/runs/{run.pk}/")
        expect(page.get_by_role("heading", name=re.compile("Run r-live"))).to_be_visible()
        expect(page.locator(f"#call-{first['call_id']}")).to_contain_text("query_stock")
        assert page.locator("#run-body").get_attribute("data-live") == live
        if live == "push":
            expect(page.locator("body")).to_have_attribute("data-push-connected", "1")
        page.evaluate("window.__notReloaded = true")
        before = len([u for u in requests if f"/console/runs/{run.pk}/" in u])

        # The agent reserves stock; the shop refuses the first attempt, so it is retried.
        shop.fault("/inventory/reservations", fail_next=1, fail_status=503)
        second = call(
            http,
            "r-live",
            step_index=1,
            tool="reserve_stock",
            args={"sku": "A12", "qty": 1},
            tool_call_id="tc-reserve",
        )
        assert second["status"] == "succeeded"

        lane = page.locator(f"#call-{second['call_id']}")
        expect(lane).to_contain_text("reserve_stock", timeout=8_000)
        # Its two attempts, the retried one first, each a bar under the call's bar.
        attempts = lane.locator("tr.attempt-row")
        expect(attempts).to_have_count(2)
        expect(attempts.first.locator(".badge")).to_have_text("retry")
        expect(attempts.last.locator(".attempt-bar.o-ok")).to_be_visible()
        expect(page.locator(".last-succeeded-id")).to_have_text("tc-reserve")
        assert page.evaluate("window.__notReloaded") is True
        # An attempt opens on its downstream request id, and under its Technical details
        # on the call's idempotency record.
        attempts.last.locator("summary").first.click()
        technical = attempts.last.locator("details.technical")
        expect(technical.locator("dl.record")).to_be_hidden()
        technical.get_by_text("Technical details", exact=True).click()
        expect(technical.locator("dl.record")).to_contain_text("recorded")
        stored = ToolCall.objects.get(call_id=second["call_id"]).attempt_rows.order_by("number")
        expect(attempts.last).to_contain_text(stored.last().downstream_request_id)
        page.screenshot(path=SHOTS / f"timeline_{live}.png", full_page=True)

        if live == "push":
            fetched = [u for u in requests if f"/console/runs/{run.pk}/" in u][before:]
            # Fetched when told (claimed, then recorded), not every few seconds.
            assert 1 <= len(fetched) <= 4, fetched
            # The socket drops and a call is made before it is back: what was pushed in
            # between was never heard, so the page fetches itself again on reconnecting.
            page.evaluate("window.__sockets.forEach((s) => s.close())")
            third = call(
                http,
                "r-live",
                step_index=2,
                tool="query_stock",
                args={"sku": "B7"},
                tool_call_id="tc-again",
            )
            expect(page.locator(f"#call-{third['call_id']}")).to_be_visible(timeout=8_000)
            assert page.evaluate("window.__notReloaded") is True
            # The run completes: the page hears of it and stops listening for more.
            assert http.post("/api/v1/runs/r-live/complete").status_code == 200
            expect(page.locator("#run-body")).to_have_attribute("data-live", "ended")


def test_a_tool_call_id_in_the_navigations_search_box_lands_on_the_call(
    toolops_server: Callable[..., Any],
    shop: Shop,
    rita: Any,
    agent_a: tuple[Agent, str],
    page: Any,
) -> None:
    from playwright.sync_api import expect

    server = toolops_server(REDIS_URL="")
    with agent_http(server, agent_a) as http:
        for run_id in ("r-other", "r-found"):
            assert http.post("/api/v1/runs", json={"run_id": run_id}).status_code == 201
        call(
            http,
            "r-other",
            step_index=0,
            tool="query_stock",
            args={"sku": "B7"},
            tool_call_id="tc-elsewhere",
        )
        found = call(
            http,
            "r-found",
            step_index=0,
            tool="query_stock",
            args={"sku": "A12"},
            tool_call_id="tc-needle-42",
        )
    run = Run.objects.get(run_id="r-found")

    log_in(page, server.url, "/console/")
    # A reviewer lands on her queue: the search box is in every page's top bar.
    expect(page.get_by_role("heading", name="Approvals")).to_be_visible()
    box = page.get_by_role("searchbox", name="Find by id")
    box.fill("tc-needle-42")
    box.press("Enter")

    expect(page).to_have_url(re.compile(rf"/console/runs/{run.pk}/#call-{found['call_id']}$"))
    expect(page.get_by_role("heading", name=re.compile("Run r-found"))).to_be_visible()
    lane = page.locator(f"#call-{found['call_id']}")
    expect(lane).to_contain_text("tc-needle-42")
    # The call is the page's target, marked as such.
    assert page.evaluate("document.querySelector(':target').id") == f"call-{found['call_id']}"
