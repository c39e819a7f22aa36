"""A possible duplicate, facts first: right under the header, before the Decide box, the
held call beside the call it may repeat — what each asks, what the earlier one got, when —
with the differences marked; the raw JSON only under Technical details. Every value on the
page is redacted by the same rules, so viewing it writes no `full_args.read` audit entry;
reading the full args is a deliberate click, audited."""

# ruff: noqa: F811

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.utils import timezone

from tests.console.conftest import (  # noqa: F401 - fixtures shared with the console tests
    fast_password_hashing,
    logged_in,
    make_call,
    make_run,
    reviewer,
    superuser,
    support,
)
from toolops.approvals.models import Approval
from toolops.models import Agent, AuditEntry, ToolCall
from toolops.tools import registry

from .test_console import hold, url

pytestmark = pytest.mark.django_db

# The demo's order, as its catalog titles it: the customer is in the title and the facts.
CATALOG = """
[[tool]]
name = "create_order"
kind = "compensable_write"
description = "Create an order."
url = "http://127.0.0.1:9/orders"
compensation = { tool = "cancel_order", args = { order_id = "$.result.order_id" } }
summary = "Order {qty} × {sku} for {amount} {currency} (customer {customer})"
display = ["sku", "qty", "amount", "currency", "customer", "order_id"]
params_schema = { type = "object" }

[[tool]]
name = "cancel_order"
kind = "idempotent_write"
internal = true
description = "Cancel an order."
url = "http://127.0.0.1:9/orders/cancel"
params_schema = { type = "object" }
"""
EMAIL = "ann@example.com"
ORDER = {"sku": "D9", "qty": 1, "amount": "64.00", "currency": "EUR", "customer": EMAIL}
READS = AuditEntry.objects.filter(action="full_args.read")


@pytest.fixture
def catalog(settings: Any, tmp_path: Path) -> Iterator[None]:
    path = tmp_path / "catalog.toml"
    path.write_text(CATALOG)
    settings.TOOLOPS_TOOLS_FILE = str(path)
    settings.TOOLOPS_POLICY_CACHE_S = 0
    registry.reset()
    yield
    registry.reset()


@pytest.fixture
def again(agent_a: tuple[Agent, str], catalog: None) -> Approval:
    """An order made 3 min ago in run r-117, and the same order again in r-118 (the
    amount written as the agent wrote it, "64.0": the same key, another text)."""
    earlier = make_run(agent_a[0], "r-117", session_key="s-1")
    first = make_call(
        earlier,
        "tc-first",
        0,
        "create_order",
        "succeeded",
        args={**ORDER, "amount": "64.0"},
        result={"order_id": "ord_7bdc0e4a", "status": "created"},
        created_at=timezone.now() - timedelta(minutes=3, seconds=5),
    )
    run = make_run(agent_a[0], "r-118", session_key="s-1")
    return hold(
        run, "tc-again", "create_order", ORDER, reason="possible_duplicate", duplicate_of=first
    )


def test_the_duplicate_is_compared_facts_first_before_the_decide_box(
    reviewer: Any, again: Approval
) -> None:
    page = logged_in(reviewer).get(url(again)).content.decode()

    top = page.index('class="card duplicate-compare"')
    assert page.index("</header>") < top < page.index('class="card decide"')
    compared = page[top : page.index("</section>", top)]
    assert "Already done: order id ord_7bdc0e4a, succeeded, 3 min ago in run r-117." in compared
    assert '<th scope="col">This call</th><th scope="col">Already done</th>' in compared
    # The difference is marked on both sides; what is the same is not.
    assert '<th scope="row">Amount</th>' in compared
    assert '<td class="this"><mark>64.00</mark></td>' in compared
    assert '<td class="done"><mark>64.0</mark></td>' in compared
    assert '<th scope="row">Sku</th>\n            <td class="this">D9</td>' in compared
    assert "Differences are marked: amount." in compared
    # What the earlier one got: its order, which this one has not.
    assert '<td class="this">not yet: waiting for you</td>' in compared
    assert '<td class="done">ord_7bdc0e4a</td>' in compared
    assert "just now, in run r-118" in compared and "3 min ago, in run r-117" in compared
    # No raw JSON above the Decide box: the duplicate's is under Technical details (the
    # conversation's earlier steps keep theirs folded in their own rows).
    assert "<pre" not in page[: page.index('class="card decide"')]
    technical = page[page.index('<details class="card technical"') :]
    result = technical[technical.index('<pre class="duplicate-result">') :]
    assert "&quot;order_id&quot;: &quot;ord_7bdc0e4a&quot;" in result[: result.index("</pre>")]
    assert "&quot;amount&quot;: &quot;64.0&quot;" in technical


def test_the_page_redacts_one_way_and_viewing_it_is_not_audited(
    reviewer: Any, again: Approval
) -> None:
    page = logged_in(reviewer).get(url(again)).content.decode()

    assert EMAIL not in page
    title = page[page.index('<span class="action">') : page.index("</h1>")]
    assert "(customer [redacted email])" in title
    assert "<dt>Customer</dt><dd>[redacted email]</dd>" in page
    args = page[page.index('<pre class="call-args">') :]
    assert "&quot;customer&quot;: &quot;[redacted email]&quot;" in args[: args.index("</pre>")]
    assert not READS.exists()


def test_the_full_args_are_an_explicit_audited_look(
    reviewer: Any, support: Any, again: Approval
) -> None:
    call = ToolCall.objects.get(approval=again)
    full = f"/console/calls/{call.call_id}/args/"
    page = logged_in(reviewer).get(url(again)).content.decode()
    assert f'<a href="{full}">Show the full args</a>' in page

    shown = logged_in(reviewer).get(full)

    assert shown.status_code == 200 and EMAIL in shown.content.decode()
    [read] = READS
    assert (read.actor_username, read.object_id, read.detail["purpose"]) == (
        "rita",
        call.call_id,
        "approval",
    )
    # Nobody else: not support staff, nor a reviewer once the call no longer waits.
    assert logged_in(support).get(full).status_code == 403
    ToolCall.objects.filter(pk=call.pk).update(status="rejected")
    assert logged_in(reviewer).get(full).status_code == 403
    assert "Show the full args" not in logged_in(reviewer).get(url(again)).content.decode()
    assert READS.count() == 1


def test_holders_of_view_full_args_keep_the_link_after_the_decision(
    reviewer: Any, again: Approval
) -> None:
    reviewer.user_permissions.add(Permission.objects.get(codename="view_full_args"))
    ToolCall.objects.filter(approval=again).update(status="rejected")
    Approval.objects.filter(pk=again.pk).update(status="rejected", note="dup")

    page = logged_in(reviewer).get(url(again)).content.decode()

    assert "Show the full args" in page and EMAIL not in page


def test_the_comparison_costs_no_query_more(
    reviewer: Any, again: Approval, django_assert_num_queries: Any
) -> None:
    client = logged_in(reviewer)

    # As test_console.PAGE_QUERIES: the duplicate, its run and the held call's come with
    # the approval's own query.
    with django_assert_num_queries(9):
        page = client.get(url(again)).content.decode()

    assert "Already done: order id ord_7bdc0e4a" in page
