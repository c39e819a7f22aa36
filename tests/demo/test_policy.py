"""The demo's agent policy (toolops/demo/policy.toml), as `manage.py demo` applies it
when it starts: validated against the catalog the demo's children load, one version
however often the demo starts, and a policy that does not validate never half-applied."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import Shop, write_catalog
from toolops.audit.models import AuditEntry
from toolops.demo.logins import CASHIER_NAME
from toolops.demo.policy import POLICY_FILE, demo_policy_apply
from toolops.models import Agent
from toolops.policy import active, versions
from toolops.policy.models import PolicyVersion
from toolops.services import agent_create

pytestmark = pytest.mark.django_db


@pytest.fixture
def cashier(db: None) -> tuple[Agent, str]:
    return agent_create(name=CASHIER_NAME)


def test_it_applies_the_demo_policy_once_however_often_the_demo_starts(
    shop: Shop, cashier: Any, settings: Any
) -> None:
    catalog = settings.TOOLOPS_TOOLS_FILE

    first = demo_policy_apply(catalog=catalog)
    again = demo_policy_apply(catalog=catalog)

    assert first == "Agent policy: the demo's (toolops/demo/policy.toml) applied as v1", first
    kept = "Agent policy: v1, the demo's (toolops/demo/policy.toml), already in force"
    assert again == kept, again
    [version] = PolicyVersion.objects.all()
    assert version.text == POLICY_FILE.read_text()
    assert (version.state, version.author) == ("applied", "demo")
    assert "applied by manage.py demo" in version.note
    [entry] = AuditEntry.objects.filter(action=AuditEntry.Action.POLICY_APPLY)
    assert entry.object_id == "v1"
    # What the demo's scenarios rely on.
    document = active.current()
    assert document is not None
    [limit] = document.document.limits
    assert (limit.name, limit.agents, limit.tools) == (
        "charges per day",
        (CASHIER_NAME,),
        ("charge",),
    )
    assert (str(limit.max), limit.per, limit.time_zone) == ("500.00", "day", "UTC")
    assert limit.on_exceed == "refuse"


def test_another_policy_in_force_is_replaced_and_the_line_says_whose(
    shop: Shop, cashier: Any, settings: Any
) -> None:
    versions.apply('default = "allow"\n', note="mine", actor_name="operator")

    said = demo_policy_apply(catalog=settings.TOOLOPS_TOOLS_FILE)

    assert said.endswith("applied as v2; it replaces v1 (by operator)"), said
    now = versions.active_version()
    assert now is not None and now.text == POLICY_FILE.read_text()


def test_a_policy_that_does_not_validate_is_not_applied_and_the_line_says_why(
    shop: Shop, cashier: Any, settings: Any
) -> None:
    catalog = settings.TOOLOPS_TOOLS_FILE
    broken = POLICY_FILE.read_text().replace('sum = "amount"', 'sum = "amont"')

    said = demo_policy_apply(catalog=catalog, text=broken)

    assert said.startswith("! Agent policy: toolops/demo/policy.toml was not applied ("), said
    assert "limit 'charges per day', field 'sum'" in said and "'amont'" in said, said
    assert said.endswith("; no policy"), said
    assert not PolicyVersion.objects.exists()
    assert not AuditEntry.objects.filter(action=AuditEntry.Action.POLICY_APPLY).exists()
    # The launcher's own settings are left as they were.
    assert catalog == settings.TOOLOPS_TOOLS_FILE


def test_without_the_cashier_agent_it_names_the_agent(shop: Shop, settings: Any) -> None:
    said = demo_policy_apply(catalog=settings.TOOLOPS_TOOLS_FILE)

    assert f"no agent is named '{CASHIER_NAME}'" in said, said
    assert not PolicyVersion.objects.exists()


def test_it_validates_against_the_catalog_it_is_given_not_the_launchers(
    shop: Shop, cashier: Any, settings: Any
) -> None:
    # The launcher's settings name no catalog; the children's names `charge`.
    children = write_catalog(shop.url)
    settings.TOOLOPS_TOOLS_FILE = ""
    try:
        said = demo_policy_apply(catalog=str(children))
    finally:
        children.unlink()

    assert said.endswith("applied as v1"), said
    assert settings.TOOLOPS_TOOLS_FILE == ""
