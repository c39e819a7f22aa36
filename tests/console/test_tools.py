"""The tools page and the policy editor: who may edit, validation, audit, effect."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from toolops.models import AuditEntry, ToolPolicy
from toolops.tools import registry

from .conftest import logged_in

pytestmark = pytest.mark.django_db

POLICY_EDITS = AuditEntry.objects.filter(action="policy.edit")
URL = "/console/tools/create_order/policy/"
EMPTY = {
    "timeout_s": "",
    "max_attempts": "",
    "backoff_base_s": "",
    "backoff_cap_s": "",
    "requires_approval": "unknown",
    "approval_ttl_s": "",
    "session_dedupe_window_s": "",
    "approvals_required": "",
}


def test_it_lists_public_and_internal_tools_with_their_policy(
    shop: Any, reviewer_client: Client
) -> None:
    response = reviewer_client.get("/console/tools/")

    assert response.status_code == 200
    names = [row.spec.name for row in response.context["rows"]]
    public = [spec.name for spec in registry.public_tools()]
    internal = sorted(n for n, s in registry.load().items() if s.internal)
    assert names == public + internal
    assert {"create_order", "quote_total", "release_stock", "query_order"} <= set(names)
    page = response.content.decode()
    assert "Create an order for a SKU at the given amount" in page
    assert '<span class="badge k-compensable_write">compensable_write</span>' in page
    assert 'title="Used only as a compensation or query' in page  # internal badge
    # No edit links for a reviewer.
    assert URL not in page


def test_it_shows_operators_an_edit_link_per_tool(shop: Any, operator_client: Client) -> None:
    page = operator_client.get("/console/tools/").content.decode()

    assert f'<a href="{URL}">Edit policy</a>' in page
    assert '<a href="/console/tools/release_stock/policy/">Edit policy</a>' in page


def test_it_saves_an_operators_policy_and_audits_it(
    shop: Any, operator: Any, operator_client: Client
) -> None:
    form = operator_client.get(URL)
    assert form.status_code == 200
    assert 'placeholder="default 2"' in form.content.decode()  # the catalog's timeout

    response = operator_client.post(
        URL, {**EMPTY, "timeout_s": "1.5", "max_attempts": "5", "requires_approval": "false"}
    )

    assert response.status_code == 302
    assert response["Location"] == "/console/tools/"
    policy = ToolPolicy.objects.get(tool="create_order")
    assert (policy.timeout_s, policy.max_attempts, policy.requires_approval) == (1.5, 5, False)
    assert policy.backoff_base_s is None and policy.approval_ttl_s is None  # catalog default
    assert policy.updated_by == operator
    entry = POLICY_EDITS.get()
    assert (entry.actor, entry.object_id, entry.detail["created"]) == (
        operator,
        "create_order",
        True,
    )
    assert (entry.object_type, entry.object_url) == (
        "policy",
        "/console/tools/create_order/policy/",
    )
    assert "timeout_s: default → 1.5" in entry.summary
    assert "max_attempts: default → 5" in entry.summary
    # The tools page shows it, marked as an override, and the note about when it applies.
    page = operator_client.get("/console/tools/").content.decode()
    assert "Policy for create_order saved. Changes apply within a few seconds" in page
    assert 'title="set by policy; catalog: 2.0"' in page


def test_it_reaches_the_executors_registry(shop: Any, operator_client: Client) -> None:
    operator_client.post(
        URL, {**EMPTY, "timeout_s": "1.5", "max_attempts": "5", "requires_approval": "false"}
    )

    # Every process re-reads policies (the test cache is 0 s).
    spec = registry.get("create_order")

    assert spec is not None
    assert (spec.timeout_s, spec.max_attempts, spec.requires_approval) == (1.5, 5, False)


def test_it_changes_an_existing_policy_and_clears_fields_back_to_default(
    shop: Any, operator: Any, operator_client: Client
) -> None:
    ToolPolicy.objects.create(tool="create_order", timeout_s=1.0, max_attempts=4)

    response = operator_client.post(URL, {**EMPTY, "max_attempts": "4"})

    assert response.status_code == 302
    policy = ToolPolicy.objects.get(tool="create_order")
    assert (policy.timeout_s, policy.max_attempts) == (None, 4)
    entry = POLICY_EDITS.get()
    assert entry.detail["created"] is False
    assert entry.summary == "timeout_s: 1.0 → default"


def test_it_saves_nothing_when_nothing_changed(shop: Any, operator_client: Client) -> None:
    response = operator_client.post(URL, EMPTY, follow=True)

    assert b"Nothing changed" in response.content
    assert not ToolPolicy.objects.exists()
    assert not POLICY_EDITS.exists()


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("timeout_s", "-1", "Timeout must be greater than 0."),
        ("timeout_s", "0", "Timeout must be greater than 0."),
        ("timeout_s", "301", "less than or equal to 300"),
        ("timeout_s", "abc", "Enter a number."),
        ("timeout_s", "nan", "Enter a number."),
        ("max_attempts", "0", "greater than or equal to 1"),
        ("max_attempts", "21", "less than or equal to 20"),
        ("max_attempts", "2.5", "Enter a whole number."),
        ("backoff_base_s", "-0.1", "Backoff base must be greater than 0."),
        ("backoff_cap_s", "0.1", "must not be below the backoff base"),
        ("approval_ttl_s", "0", "greater than or equal to 1"),
        ("session_dedupe_window_s", "-5", "greater than or equal to 0"),
        ("session_dedupe_window_s", "99999999999", "less than or equal to"),
        ("approvals_required", "3", "less than or equal to 2"),
        ("approvals_required", "0", "greater than or equal to 1"),
    ],
)
def test_it_rejects_bad_input_and_writes_nothing(
    shop: Any, operator_client: Client, field: str, value: str, message: str
) -> None:
    data = {**EMPTY, "max_attempts": "4", field: value}
    if field == "backoff_cap_s":
        data["backoff_base_s"] = "1"

    response = operator_client.post(URL, data)

    assert response.status_code == 200
    page = response.content.decode()
    assert "Nothing was saved" in page
    assert message in page
    assert response.context["form"].errors[field]
    assert not ToolPolicy.objects.exists()
    assert not POLICY_EDITS.exists()


def test_it_sets_two_reviewers_for_a_tool(shop: Any, operator_client: Client) -> None:
    from toolops.tools import registry

    operator_client.post(URL, {**EMPTY, "approvals_required": "2"})

    assert ToolPolicy.objects.get(tool="create_order").approvals_required == 2
    assert registry.get("create_order").approvals_required == 2


def test_it_accepts_zero_to_turn_the_dedupe_window_off(shop: Any, operator_client: Client) -> None:
    operator_client.post(URL, {**EMPTY, "session_dedupe_window_s": "0"})

    assert ToolPolicy.objects.get(tool="create_order").session_dedupe_window_s == 0


@pytest.mark.parametrize("persona", ["reviewer", "support"])
def test_it_forbids_non_operators_to_edit(shop: Any, persona: str, request: Any) -> None:
    client = logged_in(request.getfixturevalue(persona))

    assert client.get(URL).status_code == 403
    response = client.post(URL, {**EMPTY, "timeout_s": "1"})

    assert response.status_code == 403
    assert not ToolPolicy.objects.exists()
    assert not POLICY_EDITS.exists()


def test_it_lets_a_superuser_edit(shop: Any, superuser: Any) -> None:
    response = logged_in(superuser).post(URL, {**EMPTY, "timeout_s": "3"})

    assert response.status_code == 302
    assert ToolPolicy.objects.get().updated_by == superuser


def test_it_answers_404_for_an_unknown_tool(shop: Any, operator_client: Client) -> None:
    response = operator_client.post("/console/tools/nope/policy/", {**EMPTY, "timeout_s": "1"})

    assert response.status_code == 404
    assert not ToolPolicy.objects.exists()


def test_it_edits_an_internal_tools_policy(shop: Any, operator_client: Client) -> None:
    response = operator_client.post(
        "/console/tools/release_stock/policy/", {**EMPTY, "max_attempts": "8"}
    )

    assert response.status_code == 302
    assert ToolPolicy.objects.get(tool="release_stock").max_attempts == 8
