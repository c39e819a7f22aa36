"""The run page titles each call from the catalog (tools/facts.py) and words its errors as
sentences naming the service; the tool's name and the stored error stay on the page."""

# ruff: noqa: F811

from __future__ import annotations

from typing import Any

import pytest

from tests.console.conftest import logged_in, make_attempt, make_call, make_run, make_user
from tests.console.facts_catalog import CHARGE, facts_catalog  # noqa: F401
from toolops.models import Agent

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fast_password_hashing(settings: Any) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def test_a_call_row_shows_its_title_and_its_error_in_words(
    django_user_model: Any, agent_a: tuple[Agent, str], facts_catalog: Any
) -> None:
    run = make_run(agent_a[0], "r-titles", status="completed")
    make_call(run, "tc-1", 0, "charge", "succeeded", args=CHARGE, result={"charge_id": "ch_1"})
    failed = make_call(
        run,
        "tc-2",
        1,
        "refund",
        "failed",
        args={"charge_id": "ch_1"},
        error_class="retry",
        error_reason="downstream_error",
        error_message="HTTP 503: injected_fault",
    )
    make_attempt(
        failed,
        1,
        tool="refund",
        outcome="retry",
        http_status=503,
        error="ConnectionResetError(104, 'Connection reset by peer')",
    )
    make_call(run, "tc-3", 2, "cancel_order", "succeeded", args={"order_id": "o-1"})
    client = logged_in(make_user(django_user_model, "olga", "operators"))

    page = client.get(f"/console/runs/{run.pk}/").content.decode()

    charge = page[page.index('data-tool-call-id="tc-1"') :]
    charge = charge[: charge.index("</th>")]
    assert '<span class="call-title">Charge 89.00 EUR to customer cus_42 for order ord_1' in charge
    assert '<span class="tool">charge</span>' in charge
    # A tool without a summary keeps its row as it was: the name only.
    cancel = page[page.index('data-tool-call-id="tc-3"') :]
    cancel = cancel[: cancel.index("</th>")]
    assert "call-title" not in cancel and '<span class="tool">cancel_order</span>' in cancel
    assert (
        '<span class="err-message" title="HTTP 503: injected_fault">'
        "the payments service answered 503 (unavailable)</span>"
    ) in page
    assert ">connection reset by the payments service</dd>" in page
