"""The policy page in a real browser (Chromium through Playwright), at 1400 px and on a
390 px phone: an operator types a broken draft and sees the error without submitting,
fixes it, simulates it against calls made before, applies it with a note, sees it in force
and in the history, compares two versions and rolls back — and no page is wider than the
screen. Screenshots go to the temp folder."""

from __future__ import annotations

import textwrap
from types import SimpleNamespace
from typing import Any

import pytest

from tests.browser import CONTEXTS, DESKTOP, PHONE, SHOTS, TIMEOUT_MS, WIDEST, needs_chromium
from tests.conftest import Shop
from toolops.models import Agent
from toolops.policy.models import PolicyVersion

from .conftest import PASSWORD, make_call, make_run, make_user

pytestmark = needs_chromium

DRAFT = textwrap.dedent(
    """\
    default = "deny"

    [[grant]]
    agents = ["agent-a"]
    tools = ["query_stock", "charge"]

    [[rule]]
    name = "charges over 100"
    agents = ["*"]
    tools = ["charge"]
    when = 'context.args.amount.greaterThan(decimal("100.00"))'
    action = "approve"
    """
)
BROKEN = DRAFT.replace('agents = ["agent-a"]', 'agents = ["agent-a"')


@pytest.fixture
def scene(
    transactional_db: None, django_user_model: Any, shop: Shop, agent_a: tuple[Agent, str]
) -> SimpleNamespace:
    """An operator, and charges made before any policy: one over 100, one under."""
    make_user(django_user_model, "olga", "operators")
    run = make_run(agent_a[0], "r-before-the-policy")
    big = make_call(
        run,
        "tc-1",
        0,
        "charge",
        "succeeded",
        args={"order_id": "o-1", "amount": "250.00", "currency": "EUR"},
    )
    make_call(
        run,
        "tc-2",
        1,
        "charge",
        "succeeded",
        args={"order_id": "o-2", "amount": "20.00", "currency": "EUR"},
    )
    return SimpleNamespace(big=big)


def open_tab(browser: Any, width: int, base: str) -> Any:
    tab = browser.new_context(**CONTEXTS[width]).new_page()
    tab.set_default_timeout(TIMEOUT_MS)
    tab.goto(f"{base}/console/login/?next=/console/policy/")
    tab.get_by_label("User name").fill("olga")
    tab.get_by_label("Password").fill(PASSWORD)
    tab.get_by_role("button", name="Log in").click()
    tab.wait_for_url("**/console/policy/")
    return tab


def fits(tab: Any, width: int, name: str) -> None:
    """Not wider than the screen; a screenshot for a person to look at."""
    tab.screenshot(path=SHOTS / f"policy-{width}-{name}.png", full_page=True)
    widest, inner = tab.evaluate(f"[{WIDEST}, window.innerWidth]")
    assert widest <= min(inner, width), f"{name} is {widest} px wide at {width}"


def type_draft(tab: Any, text: str) -> None:
    """As a person types: the check runs on each change, nothing is submitted."""
    editor = tab.locator("#policy-text")
    editor.fill(text)
    editor.press("End")


def simulate_and_apply(tab: Any, note: str) -> None:
    from playwright.sync_api import expect

    apply = tab.get_by_role("button", name="Apply")
    tab.get_by_role("button", name="Simulate").click()
    expect(tab.locator("#simulation")).to_be_visible()
    expect(apply).to_be_enabled()
    tab.get_by_label("Note").fill(note)
    apply.click()
    expect(tab.locator(".messages")).to_contain_text("applied")


@pytest.mark.parametrize("width", [DESKTOP, PHONE])
def test_an_operator_writes_simulates_applies_compares_and_rolls_back(
    width: int, browser: Any, live_server: Any, scene: SimpleNamespace
) -> None:
    from playwright.sync_api import expect

    tab = open_tab(browser, width, live_server.url)
    expect(tab.locator("#active-title")).to_have_text("No policy is in force")
    check = tab.locator("#policy-check")
    apply = tab.get_by_role("button", name="Apply")

    type_draft(tab, BROKEN)
    expect(check).to_contain_text("not valid TOML")
    expect(check).to_have_class("policy-check bad")
    assert tab.url.endswith("/console/policy/")  # seen without submitting
    fits(tab, width, "broken")
    type_draft(tab, DRAFT)
    expect(check).to_have_text("Valid: 1 grant, 1 rule, 0 limits.")
    expect(apply).to_be_disabled()

    tab.get_by_role("button", name="Simulate").click()
    finding = tab.locator("#simulation tr.finding")
    expect(finding).to_have_count(1)
    expect(finding).to_contain_text("charges over 100")
    expect(finding).to_contain_text("held")
    example = finding.get_by_role("link", name="charge by agent-a")
    expect(example).to_have_attribute("href", f"/console/calls/{scene.big.call_id}/")
    expect(tab.locator("#simulation h3")).to_have_text("Simulated: 2 calls of the last 7 days")
    fits(tab, width, "simulated")
    # Changing the text after the simulation takes Apply away again.
    type_draft(tab, DRAFT + "\n")
    expect(check).to_contain_text("Valid:")
    expect(apply).to_be_disabled()
    type_draft(tab, DRAFT)
    expect(apply).to_be_enabled()

    tab.get_by_label("Note").fill("charges over 100 need a reviewer")
    apply.click()
    expect(tab.locator(".messages")).to_contain_text("Policy v1 applied")
    expect(tab.locator("#active-title")).to_have_text("In force: v1")
    expect(tab.locator(".policy-grants")).to_contain_text("every other agent")
    expect(tab.locator("#version-1")).to_contain_text("charges over 100 need a reviewer")
    assert PolicyVersion.objects.get().created_by.username == "olga"

    type_draft(tab, DRAFT.replace("100.00", "200.00"))
    simulate_and_apply(tab, "raise the threshold to 200")
    expect(tab.locator("#active-title")).to_have_text("In force: v2")
    expect(tab.locator("#version-2")).to_contain_text("in force")
    fits(tab, width, "applied")

    tab.locator(".policy-compare select[name=old]").select_option("2")
    tab.locator(".policy-compare select[name=new]").select_option("1")
    tab.get_by_role("button", name="Compare").click()
    expect(tab.locator(".policy-compared")).to_contain_text("From v2 to v1")
    expect(tab.locator(".policy-diff .d-add")).to_contain_text('decimal("100.00")')
    expect(tab.locator(".policy-diff .d-del")).to_contain_text('decimal("200.00")')
    fits(tab, width, "compared")

    version_one = tab.locator("#version-1")
    version_one.get_by_role("button", name="Roll back to v1").click()
    expect(tab.locator(".messages")).to_contain_text("Rolled back to v1")
    expect(tab.locator("#active-title")).to_have_text("In force: v3")
    expect(tab.locator("#version-3")).to_contain_text("restores v1")
    expect(tab.locator("#version-3")).to_contain_text("rollback to v1")
    assert PolicyVersion.objects.get(number=3).text == DRAFT

    for name, path in (("version", "/console/policy/versions/3/"), ("agents", "/console/agents/")):
        tab.goto(f"{live_server.url}{path}")
        expect(tab.locator("main h1").first).to_be_visible()
        fits(tab, width, name)
    tab.context.close()
