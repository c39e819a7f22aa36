"""Abuse cases for the response headers and what a client may claim in its own: the CSP,
forwarded headers, HSTS preload, and `/metrics` (open, and scraped in a flood)."""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from django.core import checks
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from tests.browser import needs_chromium, open_page
from tests.conftest import Shop
from tests.console.conftest import make_call, make_record, make_run
from toolops.models import Agent, Run

SCRIPT = "<script>window.__xss = 1</script>"
STRICT = {
    "default-src": "'self'",
    "script-src": "'self'",
    "style-src": "'self'",
    "img-src": "'self'",
    "connect-src": "'self'",
    "object-src": "'none'",
    "base-uri": "'none'",
    "form-action": "'self'",
    "frame-ancestors": "'none'",
}


def directives(header: str) -> dict[str, str]:
    parts = (part.strip().partition(" ") for part in header.split(";") if part.strip())
    return {name: value for name, _, value in parts}


@pytest.fixture
def hostile_run(agent_a: tuple[Agent, str]) -> Run:
    """A run whose unknown call's error text (a downstream's words) holds a script."""
    run = make_run(agent_a[0], "r-hostile")
    call = make_call(
        run,
        "tc-hostile",
        0,
        "create_order",
        "unknown",
        idempotency_key="f" * 64,
        error_class="unknown",
        error_reason="timeout",
        error_message=SCRIPT,
        args={"note": SCRIPT},
    )
    make_record(call, state="claimed", fence=1)
    return run


@pytest.fixture
def staff(django_user_model: Any) -> Client:
    client = Client()
    client.force_login(
        django_user_model.objects.create_superuser(username="admin", email="a@example.com")
    )
    return client


@pytest.mark.django_db
def test_every_console_page_refuses_inline_script_and_other_origins(
    staff: Client, hostile_run: Run
) -> None:
    call = hostile_run.calls.get()
    pages = [
        "/console/login/",
        "/console/",
        f"/console/runs/{hostile_run.pk}/",
        "/console/tools/",
        "/console/unknown/",
        f"/console/unknown/{call.pk}/settle/",
        "/console/health/",
        "/console/metrics/",
        "/console/approvals/",
        "/console/tickets/",
        "/console/search/?q=nothing",
        f"/console/calls/{call.call_id}/args/",
        "/admin/",
        "/admin/auth/user/",
    ]
    for path in pages:
        response = staff.get(path, follow=True)
        assert response.status_code == 200, path
        assert directives(response["Content-Security-Policy"]) == STRICT, path


@needs_chromium
def test_a_script_in_a_field_a_downstream_controls_is_escaped_and_refused_by_the_csp(
    live_server: Any, transactional_db: None, staff: Client, hostile_run: Run
) -> None:
    from playwright.sync_api import expect

    html = staff.get(f"/console/runs/{hostile_run.pk}/").content.decode()
    assert SCRIPT not in html
    assert "&lt;script&gt;window.__xss = 1&lt;/script&gt;" in html

    with open_page() as page:
        page.context.add_cookies(
            [
                {
                    "name": "sessionid",
                    "value": staff.cookies["sessionid"].value,
                    "url": live_server.url,
                }
            ]
        )
        page.goto(f"{live_server.url}/console/runs/{hostile_run.pk}/")
        expect(page.locator(".err-message").first).to_contain_text(SCRIPT)
        assert page.evaluate("window.__xss") is None
        # Had escaping failed, the script would be inline in the page: the CSP refuses it.
        page.evaluate(
            "(markup) => { const s = document.createElement('script');"
            " s.textContent = markup.replace(/<\\/?script>/g, ''); document.body.append(s); }",
            SCRIPT,
        )
        assert page.evaluate("window.__xss") is None


def test_x_forwarded_proto_from_an_untrusted_client_is_ignored(
    toolops_server: Callable[..., Any], shop: Shop
) -> None:
    # FORWARDED_ALLOW_IPS="": uvicorn's own trust of loopback proxies off, so that the
    # test's client (127.0.0.1) stands for any client on the network.
    server = toolops_server(TOOLOPS_HTTPS="1", FORWARDED_ALLOW_IPS="")

    response = httpx.get(
        f"{server.url}/console/login/", headers={"X-Forwarded-Proto": "https"}, timeout=30
    )

    # Taken for what it is, plain http: sent to https, no HSTS, no page.
    assert response.status_code == 301
    assert response.headers["Location"].startswith("https://")
    assert "Strict-Transport-Security" not in response.headers


def test_x_forwarded_proto_from_a_trusted_proxy_is_honoured(
    toolops_server: Callable[..., Any], shop: Shop
) -> None:
    server = toolops_server(
        TOOLOPS_HTTPS="1", FORWARDED_ALLOW_IPS="", TOOLOPS_TRUSTED_PROXIES="127.0.0.1"
    )

    proxied = httpx.get(
        f"{server.url}/console/login/", headers={"X-Forwarded-Proto": "https"}, timeout=30
    )
    plain = httpx.get(f"{server.url}/console/login/", timeout=30)

    assert proxied.status_code == 200
    assert proxied.headers["Strict-Transport-Security"].startswith("max-age=31536000")
    assert plain.status_code == 301  # the proxy's own plain-http request is still plain


def test_hsts_asks_for_no_preload_unless_the_deployment_opts_in(
    toolops_server: Callable[..., Any], shop: Shop
) -> None:
    https = {
        "TOOLOPS_HTTPS": "1",
        "FORWARDED_ALLOW_IPS": "",
        "TOOLOPS_TRUSTED_PROXIES": "127.0.0.1",
    }
    default = toolops_server(**https)
    opted = toolops_server(**https, TOOLOPS_HSTS_PRELOAD="1")

    def hsts(server: Any) -> str:
        forwarded = {"X-Forwarded-Proto": "https"}
        response = httpx.get(f"{server.url}/console/login/", headers=forwarded, timeout=30)
        return str(response.headers["Strict-Transport-Security"])

    assert hsts(default) == "max-age=31536000; includeSubDomains"
    assert hsts(opted) == "max-age=31536000; includeSubDomains; preload"


def test_an_open_metrics_endpoint_is_flagged_by_the_deploy_check(settings: Any) -> None:
    def deploy_warnings() -> list[str]:
        found = checks.run_checks(include_deployment_checks=True, tags=[checks.Tags.security])
        return [message.id for message in found]

    settings.TOOLOPS_METRICS_TOKEN = ""
    assert "toolops.W010" in deploy_warnings()
    settings.TOOLOPS_METRICS_TOKEN = "a-long-random-scrape-token"
    assert "toolops.W010" not in deploy_warnings()


@pytest.mark.django_db
def test_a_scrape_flood_runs_the_whole_table_aggregates_once_per_window(
    settings: Any, hostile_run: Run
) -> None:
    settings.TOOLOPS_METRICS_TOKEN = ""
    settings.TOOLOPS_METRICS_CACHE_S = 0
    with CaptureQueriesContext(connection) as first:
        assert Client().get("/metrics").status_code == 200
    assert len(first) > 0  # the aggregates

    settings.TOOLOPS_METRICS_CACHE_S = 60
    with CaptureQueriesContext(connection) as flood:
        answers = {Client().get("/metrics").content for _ in range(200)}

    assert len(flood) == 0
    assert len(answers) == 1


# -- what a client writes in its request line and Host ---------------------------------


def raw_get(port: int, target: str) -> bytes:
    """A GET sent as written: an HTTP client would resolve or re-encode the dot segments."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(
            f"GET {target} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode()
        )
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return answer


TRAVERSALS = [
    "/static/..%2f..%2f..%2f..%2fetc%2fpasswd",
    "/static/%2e%2e/%2e%2e/%2e%2e/%2e%2e/etc/passwd",
    "/static/%2e%2e%2f%2e%2e%2f%2e%2e%2ftoolops%2fsettings.py",
    "/static/console/..%2f..%2f..%2ftoolops%2fsettings.py",
    "/static/..%5c..%5c..%5cetc%5cpasswd",
    "/static//etc/passwd",
    "/static/%2fetc%2fpasswd",
    "/static/..",
]


def test_a_static_path_out_of_the_static_directories_is_a_plain_404(
    toolops_server: Callable[..., Any], shop: Shop
) -> None:
    # `..%2f` and `%2e%2e/` reach Django decoded, as `../`: the finders' refusal was a 500.
    server = toolops_server()

    for target in TRAVERSALS:
        status_line, _, rest = raw_get(server.port, target).partition(b"\r\n")
        assert status_line == b"HTTP/1.1 404 Not Found", (target, status_line)
        assert b"root:" not in rest and b"SECRET_KEY" not in rest, target
    served = raw_get(server.port, "/static/console/console.css")
    assert served.startswith(b"HTTP/1.1 200 OK"), served[:200]


@pytest.mark.parametrize("host", ["evil.example", "evil-" + "x" * 2000 + ".example"])
def test_a_host_not_allowed_on_the_api_answers_a_problem_body_not_html(
    toolops_server: Callable[..., Any], shop: Shop, agent_a: tuple[Agent, str], host: str
) -> None:
    server = toolops_server()
    headers = {"Authorization": f"Bearer {agent_a[1]}", "Host": host}

    for path in ("/api/v1/tools", "/mcp/"):
        response = httpx.get(f"{server.url}{path}", headers=headers, timeout=30)

        assert response.status_code == 400, (path, response.text[:200])
        assert response.headers["content-type"] == "application/problem+json", path
        problem = response.json()
        assert problem["status"] == 400 and problem["title"] and problem["detail"], problem
        assert "evil" not in problem["detail"]  # the rule, not the header echoed back
