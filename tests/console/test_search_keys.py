"""The console search by what a person has: an order id, a charge id, a customer's e-mail,
through the index of the values the catalog marks `searchable` (traces/search.py), kept
only as HMACs and written with the call's result by the executor."""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any
from unittest.mock import patch

import pytest
from django.core.management import call_command
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from tests.conftest import Shop, write_catalog
from tests.toolops.executor.helpers import allow_without_approval, call_ok, start_run
from toolops.approvals.models import Approval
from toolops.approvals.services import approval_decide
from toolops.models import Run, ToolCall
from toolops.tasks import execute_approved_call
from toolops.tools import registry
from traces.models import SearchKey

pytestmark = pytest.mark.django_db

EMAIL = "Ann.Lee@Example.com"
ORDER = {"sku": "A12", "qty": 1, "amount": "89.00", "currency": "EUR", "customer": "cus_42"}


@pytest.fixture
def buy(api: APIClient, shop: Shop) -> Callable[..., dict[str, Any]]:
    """`buy(run_id)`: a run that orders and charges for the order, the customer's e-mail
    in both calls' args. Its calls' results, by tool."""
    allow_without_approval("create_order", "charge")

    def run(run_id: str, email: str = EMAIL) -> dict[str, Any]:
        start_run(api, run_id=run_id)
        order = call_ok(
            api, run_id=run_id, step_index=0, tool="create_order", args={**ORDER, "email": email}
        )
        order_id = order["result"]["order_id"]
        args = {"order_id": order_id, "amount": "89.00", "email": email}
        charge = call_ok(api, run_id=run_id, step_index=1, tool="charge", args=args)
        assert charge["status"] == "succeeded", charge
        return {"create_order": order["result"], "charge": charge["result"]}

    return run


def test_a_charges_order_id_and_charge_id_find_its_run(
    reviewer_client: Client, buy: Callable[..., dict[str, Any]]
) -> None:
    results = buy("r-buy")
    buy("r-other", email="bob@example.org")
    run = Run.objects.get(run_id="r-buy")
    charge = ToolCall.objects.get(run=run, tool="charge")

    by_order = reviewer_client.get("/console/search/", {"q": results["charge"]["order_id"]})
    by_charge = reviewer_client.get("/console/search/", {"q": results["charge"]["charge_id"]})

    assert by_order["Location"].startswith(f"/console/runs/{run.pk}/#call-")
    # The charge id is in the charge's result only: the page lands at the charge.
    assert by_charge["Location"] == f"/console/runs/{run.pk}/#call-{charge.call_id}"


def test_a_customers_email_finds_their_runs_though_it_is_stored_redacted(
    reviewer_client: Client, buy: Callable[..., dict[str, Any]]
) -> None:
    buy("r-first")
    buy("r-second")
    buy("r-someone-else", email="bob@example.org")
    stored = ToolCall.objects.get(run__run_id="r-first", tool="charge").args
    assert stored["email"] != EMAIL and "[redacted" in stored["email"]

    response = reviewer_client.get("/console/search/", {"q": "  ann.lee@EXAMPLE.com "})

    assert response.status_code == 200
    page = response.content.decode()
    assert "An e-mail address in 2 runs" in page
    assert "<code>r-first</code>" in page and "<code>r-second</code>" in page
    assert "r-someone-else" not in page
    # The e-mail is in both calls' args: the earliest, the order, names it.
    assert "e-mail (matched privately) in call create_order" in page
    # Shown back only in the search box, as typed; never from the index or the calls.
    assert page.lower().count(EMAIL.lower()) == 1 and 'value="ann.lee@EXAMPLE.com"' in page


def test_the_index_holds_no_searchable_value_in_plain(
    buy: Callable[..., dict[str, Any]],
) -> None:
    results = buy("r-buy")
    plain = {EMAIL, EMAIL.lower(), results["charge"]["order_id"], results["charge"]["charge_id"]}

    rows = list(SearchKey.objects.values_list("field", "digest"))
    with connection.cursor() as cursor:  # every column, as the table holds it
        cursor.execute(f"SELECT * FROM {SearchKey._meta.db_table}")
        table = repr(cursor.fetchall())

    assert {field for field, _ in rows} >= {"order_id", "charge_id", "email"}
    assert not [value for value in plain if value in table]


def test_the_index_goes_with_its_run(buy: Callable[..., dict[str, Any]]) -> None:
    buy("r-buy")
    buy("r-kept", email="bob@example.org")
    kept = SearchKey.objects.filter(run__run_id="r-kept").count()

    Run.objects.filter(run_id="r-buy").delete()  # as the retention purge deletes runs

    assert SearchKey.objects.count() == kept > 0


def test_a_tool_without_searchable_fields_writes_no_index_row(api: APIClient, shop: Shop) -> None:
    start_run(api)
    # query_stock names no searchable field, business key, contact or displayed fact.
    call_ok(api, step_index=0, tool="query_stock", args={"sku": "A12"})

    assert not SearchKey.objects.exists()


def statements_of_an_order(api: APIClient, run_id: str) -> list[str]:
    start_run(api, run_id=run_id)
    call_ok(api, run_id=run_id, step_index=0, tool="query_stock", args={"sku": "A12"})  # warm
    with CaptureQueriesContext(connection) as ctx:
        order = call_ok(
            api, run_id=run_id, step_index=1, tool="create_order", args={**ORDER, "email": EMAIL}
        )
    assert order["status"] == "succeeded"
    # The savepoints are the test's own transaction around the claim
    # (executor/statements/claim.py).
    return [q["sql"] for q in ctx.captured_queries if "SAVEPOINT" not in q["sql"][:20]]


def test_searchable_fields_add_no_statement_on_postgresql_and_one_elsewhere(
    api: APIClient, shop: Shop, settings: Any
) -> None:
    allow_without_approval("create_order")
    indexed = statements_of_an_order(api, "r-indexed")
    # The order id and client_reference (from the result), the e-mail (from the args),
    # and the displayed facts that name something: the sku and the customer.
    fields = SearchKey.objects.filter(run__run_id="r-indexed").values_list("field", flat=True)
    assert sorted(fields) == ["client_reference", "customer", "email", "order_id", "sku"]

    # The same tool, its searchable fields taken away.
    plain = write_catalog(shop.url).read_text()
    plain = plain.replace('searchable = ["order_id", "client_reference", "email"]\n', "", 1)
    plain = plain.replace(
        'display = ["sku", "qty", "amount", "currency", "customer", "order_id"]\n', "", 1
    )
    plain = plain.replace('contact = ["email"]', "", 1)
    catalog = write_catalog(shop.url)
    catalog.write_text(plain)
    settings.TOOLOPS_TOOLS_FILE = str(catalog)
    registry.reset()
    try:
        unindexed = statements_of_an_order(api, "r-plain")
    finally:
        catalog.unlink()
    assert not SearchKey.objects.filter(run__run_id="r-plain").exists()

    if connection.vendor == "postgresql":
        # The index rows are one more CTE of the record's single statement.
        assert len(indexed) == len(unindexed), "\n".join(s[:160] for s in indexed)
        assert any("search" in s and s.startswith("WITH") for s in indexed)
    else:
        assert len(indexed) == len(unindexed) + 1
    assert not any("searchkey" in s for s in unindexed)


def test_a_new_search_key_finds_nothing_until_the_index_is_rebuilt(
    reviewer_client: Client, buy: Callable[..., dict[str, Any]], settings: Any
) -> None:
    buy("r-buy")
    run = Run.objects.get(run_id="r-buy")
    settings.TOOLOPS_SEARCH_KEY = "a-new-key-for-the-search-index"

    before = reviewer_client.get("/console/search/", {"q": EMAIL})
    out = io.StringIO()
    call_command("reindex_search", stdout=out)
    after = reviewer_client.get("/console/search/", {"q": EMAIL})

    assert "Nothing found for" in before.content.decode()
    assert after["Location"].startswith(f"/console/runs/{run.pk}/#call-")
    assert "of 2 calls" in out.getvalue()


def test_a_charge_waiting_for_a_reviewer_is_found_by_the_customers_email_and_then_its_charge_id(
    reviewer_client: Client, reviewer: Any, api: APIClient, shop: Shop
) -> None:
    allow_without_approval("create_order")
    start_run(api, run_id="r-held")
    order = call_ok(api, run_id="r-held", step_index=0, tool="create_order", args=ORDER)
    response = api.post(
        "/api/v1/runs/r-held/calls",
        {
            "step_index": 1,
            "tool": "charge",
            "args": {"order_id": order["result"]["order_id"], "amount": "89.00", "email": EMAIL},
        },
        format="json",
    )
    assert response.json()["status"] == "pending_approval", response.content
    held = ToolCall.objects.get(run__run_id="r-held", tool="charge")
    at_the_charge = f"/console/runs/{held.run_id}/#call-{held.call_id}"

    found = reviewer_client.get("/console/search/", {"q": EMAIL})
    assert found["Location"] == at_the_charge

    approval = Approval.objects.get(call=held)
    with patch("toolops.tasks.execute_approved_call.delay", autospec=True):
        approval_decide(
            approval=approval, by=reviewer, approve=True, note="", args_hash=approval.args_hash
        )
    assert execute_approved_call(approval.pk) == "succeeded"
    charge_id = ToolCall.objects.get(pk=held.pk).result["charge_id"]

    # Recorded: its result's charge id joins the e-mail, which is not written twice.
    assert reviewer_client.get("/console/search/", {"q": charge_id})["Location"] == at_the_charge
    assert SearchKey.objects.filter(call=held, field="email").count() == 1


LOOK_UP = """
[[tool]]
name = "look_up_order"
kind = "read"
url = "{shop}/orders/lookup"
timeout_s = 2.0
max_attempts = 1
searchable = ["order_id", "sku"]
params_schema = { type = "object", properties = { order_id = { type = "string" } } }
"""


def test_a_reads_searchable_values_are_written_with_the_read(
    reviewer_client: Client, api: APIClient, shop: Shop, settings: Any
) -> None:
    # A read's call row is inserted with its result: the index rows ride in that statement.
    catalog = write_catalog(shop.url, LOOK_UP.replace("{shop}", shop.url))
    settings.TOOLOPS_TOOLS_FILE = str(catalog)
    registry.reset()
    allow_without_approval("create_order")
    start_run(api, run_id="r-order")
    order_id = call_ok(api, run_id="r-order", step_index=0, tool="create_order", args=ORDER)[
        "result"
    ]["order_id"]
    start_run(api, run_id="r-look")
    try:
        looked = call_ok(
            api, run_id="r-look", step_index=0, tool="look_up_order", args={"order_id": order_id}
        )
    finally:
        catalog.unlink()
    assert looked["status"] == "succeeded", looked

    page = reviewer_client.get("/console/search/", {"q": order_id}).content.decode()

    assert "A business key in 2 runs" in page
    assert f"order id {order_id} in call look_up_order" in page
    assert f"order id {order_id} in call create_order" in page
    # The sku is the read's result's (and the order's displayed fact): both runs.
    by_sku = reviewer_client.get("/console/search/", {"q": "A12"}).content.decode()
    assert "sku A12 in call look_up_order" in by_sku and "sku A12 in call create_order" in by_sku


def test_an_email_in_more_runs_than_a_page_lists_the_latest_and_counts_the_rest(
    reviewer_client: Client, buy: Callable[..., dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("traces.console.search.LIMIT", 2)
    for n in range(3):
        buy(f"r-{n}")

    page = reviewer_client.get("/console/search/", {"q": EMAIL}).content.decode()

    assert "An e-mail address in 3 runs, the most recent:" in page
    assert [n for n in range(3) if f"<code>r-{n}</code>" in page] == [1, 2]
    assert "and 1 more run;" in page
