"""The support desk in a real browser (Chromium through Playwright): a new ticket appears
in the queue without a reload, is assigned and resolved with a note; and the same queue
told of changes over Channels when REDIS_URL is set (a real uvicorn process and Redis)."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from compensations.desk import ticket_comment
from compensations.models import Ticket, TicketEvent
from tests.browser import SHOTS, needs_chromium, open_page
from tests.console.conftest import PASSWORD, make_user
from tests.redisdb import redis_url
from toolops.models import Run

from .conftest import dead_letter

pytestmark = needs_chromium
REDIS_URL = redis_url()  # this test worker's own database


@pytest.fixture
def page() -> Iterator[Any]:
    with open_page() as tab:
        yield tab


def log_in(page: Any, base: str, username: str, next_path: str) -> None:
    page.goto(f"{base}/console/login/?next={next_path}")
    page.get_by_label("User name").fill(username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()


def test_support_sees_a_new_ticket_live_assigns_and_resolves_it(
    live_server: Any, transactional_db: None, django_user_model: Any, agent_a: Any, page: Any
) -> None:
    from playwright.sync_api import expect

    make_user(django_user_model, "sam", "support")
    dead_letter(agent_a[0], "r-first")
    log_in(page, live_server.url, "sam", "/console/tickets/")
    expect(page.get_by_role("heading", name="Tickets")).to_be_visible()
    rows = page.locator("table.tickets tbody tr")
    expect(rows).to_have_count(1)
    assert page.locator("#ticket-table").get_attribute("data-live") == "poll"

    # The worker dead-letters another compensation: it appears without a reload.
    page.evaluate("window.__notReloaded = true")
    fresh = dead_letter(agent_a[0], "r-fresh", args={"order_id": "<script>alert(1)</script>"})
    expect(page.locator(f"#ticket-{fresh.pk}")).to_contain_text("r-fresh", timeout=8_000)
    expect(rows).to_have_count(2)
    assert page.evaluate("window.__notReloaded") is True
    page.screenshot(path=SHOTS / "tickets.png", full_page=True)

    page.locator(f"#ticket-{fresh.pk}").get_by_role("link", name=f"#{fresh.pk}").click()
    expect(page.get_by_role("heading", name=re.compile("^Cancel order not made"))).to_be_visible()
    expect(page.locator("p.meta")).to_contain_text(f"Ticket #{fresh.pk}")
    # Args holding markup are shown as text, never run.
    expect(page.locator("pre.undo-args")).to_contain_text("<script>alert(1)</script>")
    expect(page.locator("table.attempts tbody tr")).to_have_count(3)

    page.get_by_role("button", name="Assign to me").click()
    expect(page.locator(".messages")).to_contain_text("Assigned to you")
    expect(page.locator(".assignee")).to_have_text("sam")

    # The ticket's page is live too: a colleague's comment shows up without a reload.
    page.evaluate("window.__notReloaded = true")
    colleague = make_user(django_user_model, "sue", "support")
    ticket_comment(ticket=fresh, by=colleague, text="Payments on-call is looking.")
    expect(page.locator("ol.events")).to_contain_text("Payments on-call is looking.", timeout=8_000)
    assert page.evaluate("window.__notReloaded") is True

    # A resolve without a note is refused, and nothing changes.
    page.get_by_role("button", name="Resolve").click()
    assert Ticket.objects.get(pk=fresh.pk).status == "open"
    page.get_by_label("Note", exact=True).fill("Cancelled the order by hand in the shop admin.")
    page.screenshot(path=SHOTS / "ticket.png", full_page=True)
    page.get_by_role("button", name="Resolve").click()
    expect(page.locator(".messages")).to_contain_text("Resolved by hand")
    expect(page.locator("#ticket-live .badge.t-closed")).to_be_visible()
    expect(page.locator("ol.events")).to_contain_text("Cancelled the order by hand")

    fresh.refresh_from_db()
    assert fresh.status == "closed"
    assert fresh.compensation.status == "resolved"
    assert Run.objects.get(pk=fresh.run_id).status == "aborted"
    kinds = list(TicketEvent.objects.filter(ticket=fresh).values_list("kind", "actor__username"))
    assert kinds == [("opened", None), ("assigned", "sam"), ("comment", "sue"), ("resolved", "sam")]


def test_a_reviewer_is_refused_and_a_post_needs_its_csrf_token(
    live_server: Any, transactional_db: None, django_user_model: Any, agent_a: Any, page: Any
) -> None:
    from playwright.sync_api import expect

    make_user(django_user_model, "rita", "reviewers")
    make_user(django_user_model, "sam", "support")
    ticket = dead_letter(agent_a[0], "r-guarded")

    log_in(page, live_server.url, "rita", "/console/")
    # A reviewer lands on her own work, the approval queue.
    expect(page.get_by_role("heading", name="Approvals")).to_be_visible()
    # The desk is not in her navigation, and its pages refuse her.
    expect(page.locator(".topbar nav")).not_to_contain_text("Tickets")
    for path in ("/console/tickets/", f"/console/tickets/{ticket.pk}/"):
        assert page.goto(f"{live_server.url}{path}").status == 403
    # Her session's cookies and a valid CSRF token still do not let her act.
    page.goto(f"{live_server.url}/console/")
    token = page.locator("input[name=csrfmiddlewaretoken]").first.get_attribute("value")
    refused = page.request.post(
        f"{live_server.url}/console/tickets/{ticket.pk}/resolve/",
        form={"note": "not mine to close", "csrfmiddlewaretoken": token},
        headers={"Referer": f"{live_server.url}/console/"},
    )
    assert refused.status == 403

    # Support, logged in, but posting without the CSRF token: refused too.
    page.context.clear_cookies()
    log_in(page, live_server.url, "sam", f"/console/tickets/{ticket.pk}/")
    expect(page.get_by_role("heading", name=re.compile("^Cancel order not made"))).to_be_visible()
    forged = page.request.post(
        f"{live_server.url}/console/tickets/{ticket.pk}/resolve/", form={"note": "forged"}
    )
    assert forged.status == 403
    assert "CSRF" in forged.text()

    ticket.refresh_from_db()
    assert ticket.status == "open"
    assert ticket.compensation.status == "dead_lettered"
    assert list(ticket.events.values_list("kind", flat=True)) == ["opened"]


@pytest.mark.skipif(not REDIS_URL, reason="TOOLOPS_TEST_REDIS_URL is not set (.ci/run sets it)")
def test_with_redis_the_queue_is_pushed_not_polled(
    toolops_server: Any, django_user_model: Any, agent_a: Any, page: Any, settings: Any
) -> None:
    from django.conf import global_settings
    from playwright.sync_api import expect

    # The server process checks the password with the default hashers.
    settings.PASSWORD_HASHERS = global_settings.PASSWORD_HASHERS
    make_user(django_user_model, "sam", "support")
    server = toolops_server(REDIS_URL=REDIS_URL)
    # This process plays the worker: it shares the server's channel layer.
    settings.REDIS_URL = REDIS_URL
    settings.CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [REDIS_URL]},
        }
    }
    from channels.layers import channel_layers

    channel_layers.backends.clear()
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url))

    log_in(page, server.url, "sam", "/console/tickets/")
    expect(page.get_by_role("heading", name="Tickets")).to_be_visible()
    assert page.locator("#ticket-table").get_attribute("data-live") == "push"
    expect(page.locator("body")).to_have_attribute("data-push-connected", "1")
    before = len([u for u in requests if "/console/tickets/" in u])

    # Made in another thread, as the worker would: Playwright's event loop owns this one.
    made: list[Ticket] = []
    maker = threading.Thread(target=lambda: made.append(dead_letter(agent_a[0], "r-pushed")))
    maker.start()
    maker.join(10)
    [ticket] = made

    expect(page.locator(f"#ticket-{ticket.pk}")).to_contain_text("r-pushed", timeout=5_000)
    fetched = [u for u in requests if "/console/tickets/" in u][before:]
    # One fetch per push, not a poll every few seconds.
    assert 1 <= len(fetched) <= 3, fetched
    channel_layers.backends.clear()
