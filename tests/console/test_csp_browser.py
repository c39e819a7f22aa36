"""Every console page (and the admin's) in a real browser (Chromium through Playwright),
under the Content-Security-Policy a real ToolOps server (uvicorn, ASGI) sends: no page
breaks it — no inline script, style or eval, nothing from another origin — and its live
updates and forms still work: a run's timeline shows a new call without a reload (over
its WebSocket with REDIS_URL, by polling without), and a reviewer approves a charge."""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from django.urls import URLPattern, URLResolver, get_resolver

from compensations.models import Ticket
from tests.browser import needs_chromium, open_page
from tests.compensations.conftest import dead_letter
from tests.conftest import Shop
from tests.redisdb import redis_url
from tests.toolops.policy.helpers import apply_policy
from toolops.models import Agent, Approval, Run, ToolCall

from .conftest import PASSWORD, make_call, make_record

pytestmark = needs_chromium
REDIS_URL = redis_url()  # this test worker's own database
CHARGE = {"order_id": "ord-9", "amount": "199.00"}

# Console routes that answer only a POST (a form's action): each is exercised through the
# page whose form posts to it. Every other console route must be visited below.
POST_ONLY = {
    "logout",
    "breaker-force-open",
    "breaker-reset",
    "run-abort",
    "approval-decide",
    "tickets-bulk",
    "ticket-assign",
    "ticket-retry",
    "ticket-resolve",
    "ticket-comment",
    "ticket-snooze",
    "ticket-unsnooze",
    "lockout-unlock",
    "notification-retry",
    "webhook-add",
    "webhook-test",
    "webhook-remove",
    "policy-validate",
    "policy-simulate",
    "policy-apply",
    "policy-rollback",
    "policy-confirm",
    "policy-withdraw",
}
# The inline script the test puts into a page, to see the policy refuse it.
PROBE = "window.__ran = true"
PROBE_HASH = base64.b64encode(hashlib.sha256(PROBE.encode()).digest()).decode()


def report_violations(page: Any) -> list[str]:
    """Every CSP violation and script error the page meets from now on, across
    navigations: `securitypolicyviolation` events (an init script, which the page's CSP
    does not govern) and Chromium's own console messages about the policy."""
    found: list[str] = []
    page.expose_function("__cspViolation", lambda text: found.append(text))
    page.add_init_script(
        "document.addEventListener('securitypolicyviolation', (e) => {"
        "  const text = `${document.location.pathname}: ${e.violatedDirective} blocked"
        " ${e.blockedURI} (${e.sourceFile}:${e.lineNumber})`;"
        "  document.documentElement.dataset.cspLast = text; window.__cspViolation(text); });"
    )
    page.on(
        "console",
        lambda m: "Content Security Policy" in m.text and found.append(f"console: {m.text}"),
    )
    page.on("pageerror", lambda error: found.append(f"script error: {error}"))
    return found


@pytest.fixture
def admin_user(django_user_model: Any, settings: Any) -> Any:
    from django.conf import global_settings

    # The server process checks the password with the default hashers.
    settings.PASSWORD_HASHERS = global_settings.PASSWORD_HASHERS
    return django_user_model.objects.create_superuser(
        username="admin", password=PASSWORD, email="admin@example.com"
    )


@pytest.fixture
def page() -> Iterator[Any]:
    with open_page() as tab:
        yield tab


def agent_http(server: Any, agent: tuple[Agent, str]) -> httpx.Client:
    auth = {"Authorization": f"Bearer {agent[1]}"}
    return httpx.Client(base_url=server.url, headers=auth, timeout=30)


def make_calls(http: httpx.Client) -> dict[str, Any]:
    """A run with a read that succeeded, a charge held for a reviewer, and a call whose
    outcome is unknown (its error text holds markup, as a downstream might send)."""
    assert http.post("/api/v1/runs", json={"run_id": "r-csp"}).status_code == 201
    read = http.post(
        "/api/v1/runs/r-csp/calls",
        json={
            "step_index": 0,
            "tool": "query_stock",
            "args": {"sku": "A12"},
            "tool_call_id": "tc-stock",
        },
    )
    assert read.json()["status"] == "succeeded", read.text
    held = http.post(
        "/api/v1/runs/r-csp/calls", json={"step_index": 1, "tool": "charge", "args": CHARGE}
    )
    assert held.status_code == 202, held.text
    run = Run.objects.get(run_id="r-csp")
    lost = make_call(
        run,
        "tc-lost",
        2,
        "create_order",
        "unknown",
        idempotency_key="e" * 64,
        error_class="unknown",
        error_reason="timeout",
        error_message="<script>alert('lost')</script><b style='color:red'>timed out</b>",
    )
    make_record(lost, state="claimed", fence=1)
    # An agent policy in force that changes nothing, for the policy pages to show.
    policy = apply_policy('default = "allow"\n', note="every agent may call every tool")
    return {
        "policy": policy,
        "run": run,
        "read": ToolCall.objects.get(call_id=read.json()["call_id"]),
        "approval": Approval.objects.get(call__call_id=held.json()["call_id"]),
        "lost": lost,
    }


def console_pages(rows: dict[str, Any], ticket: Ticket, user: Any) -> dict[str, str]:
    """Each GET route of the console by its URL name, with a real object in its path."""
    run, read, lost = rows["run"], rows["read"], rows["lost"]
    return {
        "home": "/console/",
        "nav-counts": "/console/nav/counts/",
        "runs": "/console/runs/",
        "run-detail": f"/console/runs/{run.pk}/",
        "call": f"/console/calls/{read.call_id}/",
        "call_args": f"/console/calls/{read.call_id}/args/",
        "tools": "/console/tools/",
        "tool-policy": "/console/tools/query_stock/policy/",
        "unknown": "/console/unknown/",
        "unknown-settle": f"/console/unknown/{lost.pk}/settle/",
        "health": "/console/health/",
        "metrics": "/console/metrics/?window=day&tool=query_stock",
        "search": "/console/search/?q=tc-stock",
        "approvals": "/console/approvals/",
        "approval": f"/console/approvals/{rows['approval'].approval_id}/",
        "tickets": "/console/tickets/",
        "ticket": f"/console/tickets/{ticket.pk}/",
        "audit": "/console/audit/",
        "agents": "/console/agents/",
        "agent-rate-limit": f"/console/agents/{run.agent_id}/rate-limit/",
        "lockouts": "/console/lockouts/",
        "two-factor": "/console/account/two-factor/",
        "account-notifications": "/console/account/notifications/",
        "notifications": "/console/notifications/",
        "webhooks": "/console/notifications/webhooks/",
        "policy": "/console/policy/",
        "policy-version": f"/console/policy/versions/{rows['policy'].number}/",
        "login-code": "/console/login/code/",  # no password step pending: the login page
        # Not a route of its own: the search's page when nothing matches, and the admin's.
        "search (no match)": "/console/search/?q=nothing-matches-this",
        "admin": "/admin/",
        "admin: users": "/admin/auth/user/",
        "admin: a user": f"/admin/auth/user/{user.pk}/change/",
        "admin: runs": "/admin/toolops/run/",
        "admin: a run": f"/admin/toolops/run/{run.pk}/change/",
    }


def console_route_names() -> set[str]:
    names: set[str] = set()

    def walk(patterns: list[Any], namespace: str) -> None:
        for entry in patterns:
            if isinstance(entry, URLResolver):
                walk(entry.url_patterns, entry.namespace or namespace)
            elif isinstance(entry, URLPattern) and namespace == "console" and entry.name:
                names.add(entry.name)

    walk(get_resolver().url_patterns, "")
    return names


def log_in(page: Any, base: str) -> None:
    page.goto(f"{base}/console/login/?next=/console/")
    page.get_by_label("User name").fill("admin")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()


def visit_all(page: Any, base: str, pages: dict[str, str]) -> None:
    from playwright.sync_api import expect

    for name, path in pages.items():
        response = page.goto(base + path)
        assert response is not None and response.status == 200, (name, path)
        policy = response.headers.get("content-security-policy", "")
        assert "script-src 'self'" in policy and "'unsafe-" not in policy, (name, policy)
        expect(page.locator("body")).to_be_visible()


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
def test_every_console_page_loads_with_no_csp_violation_and_still_works(
    live: str,
    toolops_server: Callable[..., Any],
    shop: Shop,
    admin_user: Any,
    agent_a: tuple[Agent, str],
    page: Any,
) -> None:
    from playwright.sync_api import expect

    server = toolops_server(REDIS_URL=REDIS_URL if live == "push" else "")
    violations = report_violations(page)
    with agent_http(server, agent_a) as http:
        rows = make_calls(http)
        pages = console_pages(rows, dead_letter(agent_a[0], "r-undo"), admin_user)
        missing = console_route_names() - POST_ONLY - set(pages) - {"login"}
        assert not missing, f"console pages this test does not visit yet: {sorted(missing)}"

        log_in(page, server.url)
        expect(page.get_by_role("heading", name="What needs you now")).to_be_visible()
        visit_all(page, server.url, pages)

        # The run's page: its bars are placed (by console.js, not a style attribute), and
        # it shows a call the agent makes afterwards without a reload.
        run = rows["run"]
        page.goto(f"{server.url}/console/runs/{run.pk}/")
        bar = page.locator(f"#call-{rows['read'].call_id} .call-bar")
        assert bar.evaluate("(el) => el.style.width").endswith("%")
        assert page.locator("#run-body").get_attribute("data-live") == live
        if live == "push":
            # The WebSocket to this origin is allowed by connect-src 'self'.
            expect(page.locator("body")).to_have_attribute("data-push-connected", "1")
        page.evaluate("window.__notReloaded = true")
        later = http.post(
            "/api/v1/runs/r-csp/calls",
            json={"step_index": 3, "tool": "query_stock", "args": {"sku": "B7"}},
        )
        assert later.json()["status"] == "succeeded", later.text
        expect(page.locator(f"#call-{later.json()['call_id']}")).to_contain_text(
            "query_stock", timeout=8_000
        )
        assert page.evaluate("window.__notReloaded") is True

    # A reviewer's form posts under the policy (form-action 'self') and lands; the
    # charge's confirmation is a <dialog> driven by a script the policy allows.
    page.goto(f"{server.url}{pages['approval']}")
    page.get_by_role("button", name="Approve").click()
    page.get_by_role("button", name=re.compile("^Approve: charge")).click()
    expect(page.locator(".messages")).to_contain_text("Approved")
    assert Approval.objects.get(pk=rows["approval"].pk).status == "approved"

    # The listener hears a violation when there is one: an inline script put into the
    # page (as an escaping bug would) is refused. Its reports come after every earlier one.
    page.evaluate("history.replaceState(null, '', '/console/csp-probe')")
    page.evaluate(
        "(probe) => { const s = document.createElement('script'); s.textContent = probe;"
        " document.body.append(s); }",
        PROBE,
    )
    # (Waited for by an attribute, not wait_for_function: that evals, which the CSP refuses.)
    probed = re.compile("^/console/csp-probe")
    expect(page.locator("html")).to_have_attribute("data-csp-last", probed)
    page.evaluate("1")  # hands any report still on its way to Python
    assert page.evaluate("window.__ran") is None
    probe = [v for v in violations if v.startswith("/console/csp-probe") or PROBE_HASH in v]
    assert probe, violations
    assert [v for v in violations if v not in probe] == []


def test_the_console_names_its_post_only_routes_as_this_test_expects() -> None:
    # A renamed route would slip out of the visit above unnoticed.
    assert console_route_names() >= POST_ONLY, POST_ONLY - console_route_names()
