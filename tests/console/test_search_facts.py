"""The console search by the ids people hold from an approval or a ticket: the customer id
shown on every one of them, an order id (landing on the call that made the order), and an
approval's own id (traces/search.py `search_paths`, traces/console/search.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.test import Client
from rest_framework.test import APIClient

from tests.conftest import Shop
from tests.console.conftest import logged_in
from tests.console.test_search_keys import ORDER, buy  # noqa: F401 (a fixture)
from tests.toolops.executor.helpers import allow_without_approval, call_ok, start_run
from toolops.approvals.models import Approval
from toolops.models import Run, ToolCall
from traces.models import SearchKey

pytestmark = pytest.mark.django_db


def at(call: ToolCall) -> str:
    return f"/console/runs/{call.run_id}/#call-{call.call_id}"


def test_the_customer_id_on_every_approval_and_ticket_finds_the_run(
    reviewer_client: Client,
    buy: Callable[..., dict[str, Any]],  # noqa: F811
) -> None:
    buy("r-cus")
    run = Run.objects.get(run_id="r-cus")
    order = ToolCall.objects.get(run=run, tool="create_order")

    found = reviewer_client.get("/console/search/", {"q": "cus_42"})

    # The customer is a displayed fact of both calls: the earliest names the run.
    assert found.status_code == 302 and found["Location"] == at(order)


def test_an_order_id_lands_on_the_call_that_made_the_order(
    reviewer_client: Client,
    buy: Callable[..., dict[str, Any]],  # noqa: F811
) -> None:
    results = buy("r-order")
    order = ToolCall.objects.get(run__run_id="r-order", tool="create_order")

    found = reviewer_client.get("/console/search/", {"q": results["create_order"]["order_id"]})

    # The charge names the order too (its args), but the order was made by create_order.
    assert found["Location"] == at(order)


def test_an_amount_or_a_currency_is_not_an_id_and_finds_nothing(
    reviewer_client: Client,
    buy: Callable[..., dict[str, Any]],  # noqa: F811
) -> None:
    buy("r-amounts")

    for q in ("89.00", "EUR"):
        page = reviewer_client.get("/console/search/", {"q": q})
        assert page.status_code == 200 and "r-amounts" not in page.content.decode(), q
    indexed = set(SearchKey.objects.values_list("field", flat=True))
    assert {"customer", "order_id"} <= indexed and not indexed & {"amount", "currency", "qty"}


def hold_charge(api: APIClient) -> ToolCall:
    allow_without_approval("create_order")
    start_run(api, run_id="r-held")
    order = call_ok(api, run_id="r-held", step_index=0, tool="create_order", args=ORDER)
    args = {"order_id": order["result"]["order_id"], "amount": "89.00"}
    body = {"step_index": 1, "tool": "charge", "args": args}
    response = api.post("/api/v1/runs/r-held/calls", body, format="json")
    assert response.json()["status"] == "pending_approval", response.content
    return ToolCall.objects.get(run__run_id="r-held", tool="charge")


def test_an_approval_id_opens_the_approval_for_a_reviewer_and_its_call_for_others(
    reviewer_client: Client, support: Any, api: APIClient, shop: Shop
) -> None:
    held = hold_charge(api)
    approval = Approval.objects.get(call=held)

    for_reviewer = reviewer_client.get("/console/search/", {"q": approval.approval_id})
    for_support = logged_in(support).get("/console/search/", {"q": approval.approval_id})

    assert for_reviewer["Location"] == f"/console/approvals/{approval.approval_id}/"
    assert for_support["Location"] == at(held)


def test_an_unknown_approval_id_finds_nothing(
    reviewer_client: Client, api: APIClient, shop: Shop
) -> None:
    hold_charge(api)

    page = reviewer_client.get("/console/search/", {"q": "ap-000000000000000000000000"})

    assert page.status_code == 200 and "r-held" not in page.content.decode()
