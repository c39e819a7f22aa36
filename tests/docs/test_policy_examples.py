"""docs/policy.md's TOML is real: every ```toml block is a whole policy that validates
(versions.validate) and applies against the demo catalog, with the agents it names, and
each worked example does what its sentence says (the verdict, and for the limit the
counters)."""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterator
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from toolops.models import Agent
from toolops.policy import active, limits, versions, wording
from toolops.policy.active import Active
from toolops.policy.document import WILDCARD
from toolops.policy.verdict import Verdict, verdict
from toolops.services import agent_create
from toolops.tools import registry

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "policy.md"
DEMO_CATALOG = ROOT / "toolops" / "demo" / "catalog.toml"
BLOCK = re.compile(r"^```toml\n(.*?)^```", re.M | re.S)

pytestmark = pytest.mark.django_db


def toml_blocks() -> list[str]:
    return BLOCK.findall(DOC.read_text())


def named_agents(text: str) -> set[str]:
    data = tomllib.loads(text)
    tables = [*data.get("grant", []), *data.get("rule", []), *data.get("limit", [])]
    return {name for table in tables for name in table["agents"] if name != WILDCARD}


def block_with(name: str) -> str:
    """The one example block that defines a rule or limit named `name`."""
    found = [text for text in toml_blocks() if f'name = "{name}"' in text]
    assert len(found) == 1, f"{len(found)} blocks define {name!r}"
    return found[0]


@pytest.fixture
def demo_catalog(settings: Any) -> Iterator[None]:
    settings.TOOLOPS_TOOLS_FILE = str(DEMO_CATALOG)
    registry.reset()
    yield
    registry.reset()


def applied(text: str) -> Active:
    for name in named_agents(text):
        if not Agent.objects.filter(name=name).exists():
            agent_create(name=name)
    versions.apply(text, note="docs/policy.md example", actor_name="test")
    policy = active.current()
    assert policy is not None
    return policy


def decide(policy: Active, agent: str, tool: str, age_days: int = 30, **args: Any) -> Verdict:
    spec = registry.get(tool, include_internal=False)
    assert spec is not None, tool
    created = timezone.now() - timedelta(days=age_days, hours=1)
    return verdict(policy, agent=agent, agent_created=created, spec=spec, args=args)


def test_the_doc_has_the_reference_document_and_five_examples_and_more() -> None:
    blocks = toml_blocks()
    assert len(blocks) >= 7, len(blocks)
    assert len(re.findall(r"^\*\*[1-5]\. ", DOC.read_text(), re.M)) == 5


def test_every_toml_block_validates_and_applies(demo_catalog: None) -> None:
    for number, text in enumerate(toml_blocks(), 1):
        for name in named_agents(text):
            if not Agent.objects.filter(name=name).exists():
                agent_create(name=name)
        document = versions.validate(text)
        assert document.grants or document.rules or document.limits, f"block {number} is empty"
        version = versions.apply(text, note=f"block {number}", actor_name="test")
        assert version.state == "applied"


def test_1_the_support_bot_may_only_read(demo_catalog: None) -> None:
    policy = applied(block_with("support bot reads only"))

    assert decide(policy, "support-bot", "query_stock", sku="A12").refused_by is None
    refused = decide(policy, "support-bot", "reserve_stock", sku="A12", qty=1)
    assert refused.refused_by == "support bot reads only"
    assert decide(policy, "other-agent", "reserve_stock", sku="A12", qty=1).refused_by is None


def test_1_the_deny_variant_keeps_writes_out_of_its_tool_list(demo_catalog: None) -> None:
    text = next(t for t in toml_blocks() if 'default = "deny"' in t and "support-bot" in t)
    policy = applied(text)
    public = registry.names()

    shown = active.tools_for(policy, "support-bot", public)
    assert shown == [n for n in public if n in ("query_stock", "search_products")]
    assert active.tools_for(policy, "shop-assistant", public) == public
    assert active.tools_for(policy, "anyone-else", public) == []


def test_2_charges_over_100_need_a_reviewer(demo_catalog: None) -> None:
    policy = applied(block_with("charges up to 100"))

    small = decide(policy, "a", "charge", order_id="o-1", amount="100.00")
    assert (small.lifted, small.held_by) == (True, None)
    big = decide(policy, "a", "charge", order_id="o-1", amount="100.01")
    assert (big.lifted, big.held_by, big.approvals_required) == (False, "charges over 100", 1)


def test_3_two_reviewers_over_1000(demo_catalog: None) -> None:
    policy = applied(block_with("charges over 1000"))

    one = decide(policy, "a", "charge", order_id="o-1", amount="1000.00")
    assert (one.held_by, one.approvals_required) == ("charges over 100", 1)
    two = decide(policy, "a", "charge", order_id="o-1", amount="2500.00")
    assert (two.held_by, two.approvals_required) == ("charges over 1000", 2)
    assert [name for name, _ in two.rules] == ["charges over 100", "charges over 1000"]


def test_4_a_new_agents_orders_wait_for_a_reviewer_in_its_first_week(
    demo_catalog: None,
) -> None:
    policy = applied(block_with("new agents' orders"))
    order = {"sku": "A12", "qty": 1, "amount": "50.00"}

    for age in (0, 6):
        new = decide(policy, "a", "create_order", age_days=age, **order)
        assert (new.held_by, new.lifted) == ("new agents' orders", False), age
    settled = decide(policy, "a", "create_order", age_days=7, **order)
    assert (settled.held_by, settled.lifted) == (None, True)
    big = decide(policy, "a", "create_order", age_days=30, **{**order, "amount": "250.00"})
    assert (big.held_by, big.lifted) == (None, False)  # the catalog's approval stands


def test_5_500_eur_per_agent_per_day(demo_catalog: None) -> None:
    policy = applied(block_with("charges in euros only"))
    charge = {"order_id": "o-1", "amount": "480.00"}

    for other in ({"currency": "USD"}, {}):
        refused = decide(policy, "a", "charge", **charge, **other)
        assert refused.refused_by == "charges in euros only", other
    first = decide(policy, "a", "charge", **charge, currency="EUR")
    [(limit, hold)] = first.charges
    assert (hold.currency, hold.units) == ("EUR", 4_800_000)
    assert wording.resets(limit, limits.period(limit).resets_at) == (
        "it resets at 00:00 Europe/Berlin"
    )

    # Each agent is counted on its own: 480.00 leaves 20.00 for this agent only.
    one, two = agent_create(name="agent-one")[0], agent_create(name="agent-two")[0]
    more = decide(policy, "a", "charge", order_id="o-2", amount="30.00", currency="EUR")
    [(_, extra)] = more.charges
    assert limits.reserve_all(one.pk, [hold]) == ()
    assert limits.reserve_all(one.pk, [extra]) == (0,)
    assert limits.reserve_all(two.pk, [extra]) == ()
    spent = limits.spent(one.pk, limit, hold.period)
    assert limits.shown(limit, spent["EUR"]) == "480.00"
    assert limit.max == Decimal("500.00")
