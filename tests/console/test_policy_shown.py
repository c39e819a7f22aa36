"""The agent policy where people meet it beyond its own page: the agents page (each agent's
tools and limits), the operator's home (agents near a spend limit), and the call and
approval pages (which rule, or limit, of which version refused or held the call)."""

from __future__ import annotations

import re
import textwrap
from datetime import UTC, datetime
from typing import Any

import pytest
from django.test import Client

from tests.conftest import Shop
from tests.toolops.approvals.test_console import hold
from tests.toolops.policy.helpers import apply_policy
from toolops.models import Agent, ToolCall
from toolops.policy import limits
from toolops.policy.models import SpendCounter
from toolops.services import agent_create
from toolops.views.attention import agents_near_spend_limit

from .conftest import make_call, make_run

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 12, 7, 15, 0, tzinfo=UTC)
POLICY = textwrap.dedent(
    """\
    default = "deny"

    [[grant]]
    agents = ["agent-a"]
    tools = ["*"]

    [[grant]]
    agents = ["*"]
    tools = ["query_stock"]

    [[rule]]
    name = "charges over 100"
    agents = ["*"]
    tools = ["charge"]
    when = 'context.args.amount.greaterThan(decimal("100.00"))'
    action = "approve"

    [[limit]]
    name = "charges per day"
    agents = ["*"]
    tools = ["charge"]
    sum = "amount"
    max = "500.00"
    per = "day"
    on_exceed = "approve"

    [[limit]]
    name = "searches per day"
    agents = ["agent-b"]
    tools = ["search_products"]
    max = 10
    per = "day"
    """
)


@pytest.fixture
def agents(shop: Shop, monkeypatch: pytest.MonkeyPatch) -> tuple[Agent, Agent]:
    monkeypatch.setattr(limits, "clock", lambda: NOW)
    return agent_create(name="agent-a")[0], agent_create(name="agent-b")[0]


def spent(agent: Agent, limit: str, units: int, currency: str = "") -> None:
    SpendCounter.objects.create(
        agent=agent, limit=limit, period="2026-12-07", currency=currency, spent=units
    )


def test_the_agents_page_shows_each_agents_tools_and_limits(
    operator_client: Client, agents: tuple[Agent, Agent]
) -> None:
    a, b = agents
    page = operator_client.get("/console/agents/").content.decode()
    assert page.count('all public tools <span class="muted small">(no policy)</span>') == 2

    apply_policy(POLICY)
    spent(a, "charges per day", 4_800_000, "EUR")
    spent(b, "searches per day", 3)
    page = operator_client.get("/console/agents/").content.decode()
    row_a = re.search(rf'<tr id="agent-{a.pk}">(.*?)</tr>', page, re.S)
    row_b = re.search(rf'<tr id="agent-{b.pk}">(.*?)</tr>', page, re.S)
    assert row_a is not None and row_b is not None
    assert "all public tools" in row_a[1]
    assert "“charges per day”: 480.00 EUR of 500.00 EUR today" in row_a[1]
    assert "searches per day" not in row_a[1]
    tools_b = re.search(r'<td class="summary policy-tools">(.*?)</td>', row_b[1], re.S)
    assert tools_b is not None and tools_b[1] == "<code>query_stock</code>"
    assert "“searches per day”: 3 calls of 10 calls today" in row_b[1]
    assert "“charges per day”: 0.00 of 500.00 today" in row_b[1]


def test_the_home_lists_agents_at_80_percent_of_a_limit(
    django_user_model: Any, operator_client: Client, agents: tuple[Agent, Agent]
) -> None:
    a, b = agents
    assert agents_near_spend_limit() == []
    apply_policy(POLICY)
    spent(a, "charges per day", 4_000_000, "EUR")  # 80%: listed
    spent(b, "searches per day", 7)  # 70%: not
    spent(b, "charges per day", 3_000_000, "USD")  # 60%: not
    # Yesterday's counter belongs to a period that is over.
    SpendCounter.objects.create(agent=b, limit="searches per day", period="2026-12-06", spent=10)
    near = agents_near_spend_limit()
    assert [(n.agent, n.spent) for n in near] == [("agent-a", "400.00 EUR")]
    assert near[0].limit == "500.00 EUR (80% of “charges per day”, today)"

    page = operator_client.get("/console/").content.decode()
    card = re.search(r'<section class="card signal signal-spend".*?</section>', page, re.S)
    assert card is not None
    assert '<a href="/console/policy/#active">agent-a</a>: 400.00 EUR of 500.00 EUR' in card[0]


def test_a_refused_call_names_its_rule_and_version(
    reviewer_client: Client, agents: tuple[Agent, Agent]
) -> None:
    version = apply_policy(POLICY).number
    run = make_run(agents[1], "r-refused")
    base = {"status": "failed", "error_class": "fatal", "policy_version": version}
    make_call(
        run,
        "tc-0",
        0,
        "charge",
        error_reason="not_permitted",
        policy_rules=[["not granted", "refuse"]],
        **base,
    )
    make_call(
        run,
        "tc-1",
        1,
        "query_stock",
        error_reason="spend_limit",
        policy_rules=[["charges over 100", "approve"], ["charges per day", "refuse"]],
        **base,
    )
    make_call(run, "tc-2", 2, "query_stock", "succeeded", policy_version=version)
    page = reviewer_client.get(f"/console/runs/{run.pk}/").content.decode()
    said = re.findall(r'<p class="policy-said">(.*?)</p>', page, re.S)
    link = f'(<a href="/console/policy/versions/{version}/">policy v{version}</a>)'
    assert said == [
        f"Refused by the agent policy: no grant gives this agent the tool {link}.",
        f"Refused by policy limit “charges per day” {link}.",
    ]
    # Every console user may read the version the page links to.
    assert reviewer_client.get(f"/console/policy/versions/{version}/").status_code == 200
    assert reviewer_client.get("/console/policy/").status_code == 403


def test_a_held_call_names_its_rule_on_the_call_and_approval_pages(
    reviewer_client: Client, agents: tuple[Agent, Agent]
) -> None:
    version = apply_policy(POLICY).number
    run = make_run(agents[0], "r-held")
    by_rule = hold(run, "tc-rule", "charge", reason="policy")
    by_limit = hold(run, "tc-limit", "charge", reason="policy", step_index=4)
    by_rule.rule, by_limit.rule = "charges over 100", "charges per day"
    for approval in (by_rule, by_limit):
        approval.policy_version = version
        approval.save(update_fields=["rule", "policy_version"])
    ToolCall.objects.filter(run=run).update(policy_version=version)
    link = f'(<a href="/console/policy/versions/{version}/">policy v{version}</a>)'

    page = reviewer_client.get(f"/console/approvals/{by_rule.approval_id}/").content.decode()
    assert f"Held by policy rule “charges over 100” {link}." in page
    live = reviewer_client.get(f"/console/approvals/{by_rule.approval_id}/", HTTP_HX_REQUEST="true")
    assert f"Held by policy rule “charges over 100” {link}." in live.content.decode()
    page = reviewer_client.get(f"/console/approvals/{by_limit.approval_id}/").content.decode()
    assert f"Held by policy limit “charges per day” {link}." in page

    run_page = reviewer_client.get(f"/console/runs/{run.pk}/").content.decode()
    said = re.findall(r'<p class="policy-said">(.*?)</p>', run_page, re.S)
    assert sorted(said) == [
        f"Held by policy limit “charges per day” {link}.",
        f"Held by policy rule “charges over 100” {link}.",
    ]
