"""People's accounts in a real browser (Chromium through Playwright): the lockout page
after five wrong passwords, and enrolling a TOTP device then logging in with a code."""

from __future__ import annotations

import base64
import re
import time
from collections.abc import Iterator
from typing import Any

import pytest
from django_otp.oath import TOTP

from tests.browser import SHOTS, needs_chromium, open_page

from .conftest import PASSWORD, make_user

pytestmark = needs_chromium


@pytest.fixture
def browser_page(live_server: Any) -> Iterator[Any]:
    with open_page() as page:
        yield page


def log_in(page: Any, base: str, username: str, password: str) -> Any:
    page.goto(f"{base}/console/login/")
    page.get_by_label("User name").fill(username)
    page.get_by_label("Password").fill(password)
    with page.expect_response(lambda r: r.url.endswith("/console/login/")) as answer:
        page.get_by_role("button", name="Log in").click()
    return answer.value


def code_from_secret(secret: str, steps_ahead: int = 0) -> str:
    text = secret.replace(" ", "")
    key = base64.b32decode(text + "=" * (-len(text) % 8))
    totp = TOTP(key)
    totp.time = time.time() + 30 * steps_ahead
    return f"{totp.token():06d}"


def test_it_shows_the_lockout_page_after_five_wrong_passwords(
    live_server: Any, transactional_db: None, django_user_model: Any, browser_page: Any
) -> None:
    from playwright.sync_api import expect

    make_user(django_user_model, "rita", "reviewers")
    page = browser_page
    for _ in range(4):
        assert log_in(page, live_server.url, "rita", "wrong").status == 200
        expect(page.get_by_role("alert")).to_contain_text("did not match")

    assert log_in(page, live_server.url, "rita", "wrong").status == 429
    answer = log_in(page, live_server.url, "rita", PASSWORD)

    assert answer.status == 429
    expect(page.get_by_role("heading", name="Login locked")).to_be_visible()
    expect(page.get_by_role("alert")).to_contain_text("rita")
    expect(page.get_by_role("alert")).to_contain_text("127.0.0.1")
    expect(page.get_by_role("alert")).to_contain_text("even with the right password")
    page.screenshot(path=str(SHOTS / "login_locked.png"), full_page=True)
    page.goto(f"{live_server.url}/console/")
    expect(page).to_have_url(re.compile(r"/console/login/"))


def test_it_enrols_a_totp_device_and_asks_for_the_code_at_login(
    live_server: Any,
    transactional_db: None,
    django_user_model: Any,
    browser_page: Any,
    settings: Any,
) -> None:
    from playwright.sync_api import expect

    # No pause after the wrong code below (test_two_factor.py shows the pause).
    settings.OTP_TOTP_THROTTLE_FACTOR = 0

    make_user(django_user_model, "rita", "reviewers")
    page = browser_page
    log_in(page, live_server.url, "rita", PASSWORD)
    expect(page.get_by_role("heading", name="Approvals")).to_be_visible()  # her work

    # Enrol: the secret is shown as text; a code from it confirms the device.
    page.get_by_role("link", name="rita").click()  # her account: notifications, two-factor
    page.get_by_role("link", name="your two-factor settings").click()
    expect(page.get_by_role("heading", name="Two-factor login")).to_be_visible()
    secret = page.locator(".totp-secret").inner_text()
    expect(page.locator(".totp-uri")).to_contain_text("otpauth://totp/ToolOps%3Arita?")
    page.get_by_label("Code").fill(code_from_secret(secret))
    page.get_by_role("button", name="Confirm").click()
    expect(page.locator(".messages")).to_contain_text("Two-factor is on")
    page.screenshot(path=str(SHOTS / "two_factor_on.png"), full_page=True)

    page.get_by_role("button", name="Log out").click()
    expect(page).to_have_url(re.compile(r"/console/login/"))

    # The password alone leads to the code step; a wrong code is refused; the next right
    # one (a code is good once, so the next time step's) logs in.
    log_in(page, live_server.url, "rita", PASSWORD)
    expect(page.get_by_role("heading", name="Enter your code")).to_be_visible()
    right = {code_from_secret(secret, n) for n in (-1, 0, 1, 2)}
    page.get_by_label("Code").fill(
        next(c for c in ("000000", "123456", "999999") if c not in right)
    )
    page.get_by_role("button", name="Verify").click()
    expect(page.get_by_role("alert")).to_contain_text("That code is not right")
    page.get_by_label("Code").fill(code_from_secret(secret, 1))
    page.get_by_role("button", name="Verify").click()
    expect(page.get_by_role("heading", name="Approvals")).to_be_visible()
    expect(page.locator(".topbar .who")).to_contain_text("rita")
