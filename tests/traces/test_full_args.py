"""`/console/calls/<call_id>/args/`: a call's full args and result, for the permission
`traces.view_full_args` only (superusers have it), every look audited; and the catalog's
`redact` field."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse
from rest_framework.test import APIClient

from tests.console.conftest import logged_in, make_user
from tests.toolops.api.helpers import body, create_run, post_call
from tests.traces.sensitive_fixtures import (
    API_KEY,
    CARD,
    EMAIL,
    SENSITIVE_ARGS,
    Echo,
    echo_fixture,  # noqa: F401
    echo_server_fixture,  # noqa: F401
    leaks,
)
from toolops.models import AuditEntry
from toolops.tools.catalog import CatalogError, parse

pytestmark = pytest.mark.django_db

READS = AuditEntry.objects.filter(action="full_args.read")


@pytest.fixture
def saved(api: APIClient, echo: Echo) -> dict[str, Any]:
    create_run(api, "r-full")
    response = post_call(api, "r-full", step_index=0, tool="save_profile", args=SENSITIVE_ARGS)
    assert response.status_code == 200
    return body(response)


def page_url(call: dict[str, Any]) -> str:
    return reverse("console:call_args", args=[call["call_id"]])


def test_it_refuses_without_the_permission_and_audits_nothing(
    saved: dict[str, Any], django_user_model: Any
) -> None:
    operator = make_user(django_user_model, "olga", "operators")
    reviewer = make_user(django_user_model, "rita", "reviewers")

    for user in (operator, reviewer):
        response = logged_in(user).get(page_url(saved))
        assert response.status_code == 403
        assert not leaks(response.content.decode())
    assert not READS.exists()
    # Anonymous: the login page, as for every console page.
    assert APIClient().get(page_url(saved)).status_code == 302


def test_it_shows_the_full_args_and_result_with_the_permission_audited(
    saved: dict[str, Any], django_user_model: Any
) -> None:
    support = make_user(django_user_model, "sam", "support")
    support.user_permissions.add(Permission.objects.get(codename="view_full_args"))

    response = logged_in(support).get(page_url(saved))

    assert response.status_code == 200
    page = response.content.decode()
    assert EMAIL in page and CARD in page and API_KEY in page
    assert "no-store" in response["Cache-Control"]
    read = READS.get()
    assert (read.actor, read.object_id, read.detail["purpose"]) == (
        support,
        saved["call_id"],
        "console",
    )
    assert read.object_url == f"/console/calls/{saved['call_id']}/"
    # Each look is one more entry.
    logged_in(support).get(page_url(saved))
    assert READS.count() == 2


def test_a_superuser_may_and_an_unknown_call_is_404(
    saved: dict[str, Any], django_user_model: Any
) -> None:
    superuser = django_user_model.objects.create_superuser(username="admin", password="x")
    assert logged_in(superuser).get(page_url(saved)).status_code == 200
    missing = logged_in(superuser).get("/console/calls/c-nope/args/")
    assert missing.status_code == 404
    assert READS.count() == 1


@pytest.mark.parametrize(
    ("value", "field", "problem"),
    [
        ("card_holder", "redact", "must be a list of field paths"),
        (["ok", 7], "redact[1]", "7 is not a field path"),
        (["payer..email"], "redact[0]", "'payer..email' is not a field path"),
        (["$.args.pin"], "redact[0]", "is not a field path"),
    ],
)
def test_a_bad_catalog_redact_names_the_tool_and_field(
    value: Any, field: str, problem: str
) -> None:
    tool = {
        "name": "pay",
        "kind": "read",
        "url": "http://127.0.0.1:9/p",
        "params_schema": {"type": "object"},
        "redact": value,
    }

    with pytest.raises(CatalogError) as refused:
        parse({"tool": [tool]})

    assert refused.value.tool == "pay" and refused.value.field == field
    assert problem in str(refused.value) and "tool 'pay'" in str(refused.value)


def test_a_catalog_redact_is_kept_on_the_tool() -> None:
    tool = {
        "name": "pay",
        "kind": "read",
        "url": "http://127.0.0.1:9/p",
        "params_schema": {"type": "object"},
        "redact": ["pin", "payer.email"],
    }

    assert parse({"tool": [tool]})[0].redact == ("pin", "payer.email")
