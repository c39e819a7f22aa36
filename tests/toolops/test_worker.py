"""A real Celery worker with beat embedded settles an unknown outcome on its own
(API.md: "With a healthy query tool an unknown call settles within 30 s")."""

from __future__ import annotations

from collections.abc import Callable

from rest_framework.test import APIClient

from tests.conftest import Shop
from tests.demo.launcher import processes_with_env
from tests.toolops.executor.helpers import allow_without_approval, call_ok, get_run, start_run
from tests.worker import Worker, wait_for
from toolops.models import Attempt, ToolCall

ORDER = {"sku": "A12", "qty": 1, "amount": "19.90"}
SETTLE_WITHIN_S = 30.0


def test_the_worker_settles_an_unknown_order_once_the_query_answers(
    worker: Callable[[], Worker], api: APIClient, shop: Shop
) -> None:
    allow_without_approval("create_order")
    start_run(api)
    shop.fault("/orders", drop_after_commit=1)
    shop.fault("/orders/lookup", fail_next=10_000, fail_status=500)
    call = call_ok(api, step_index=1, tool="create_order", args=ORDER)
    assert call["status"] == "unknown", call
    row = ToolCall.objects.get(call_id=call["call_id"])
    assert row.next_reconcile_at is not None
    [order] = shop.state()["orders"]
    shop.fault("/orders/lookup")
    lookups_before = len(shop.requests("/orders/lookup"))

    w = worker()
    took = wait_for(
        lambda: ToolCall.objects.filter(pk=row.pk, status="succeeded").exists(),
        SETTLE_WITHIN_S,
        w,
    )

    row.refresh_from_db()
    assert row.result["order_id"] == order["order_id"]
    assert row.next_reconcile_at is None
    assert row.finished_at is not None
    # The worker asked query_order by the call's client reference; it ordered nothing.
    lookups = shop.requests("/orders/lookup")[lookups_before:]
    assert lookups, "the worker settled the call without asking query_order"
    assert {r["body"]["client_reference"] for r in lookups} == {row.client_reference}
    assert lookups[-1]["status"] == 200
    assert len(shop.requests("/orders")) == 1
    assert shop.state()["counts"]["orders"] == 1
    assert Attempt.objects.filter(call=row, purpose="reconcile", http_status=200).count() == 1
    answer = get_run(api)["calls"][0]
    assert answer["status"] == "succeeded"
    assert answer["result"]["order_id"] == order["order_id"]
    assert took <= SETTLE_WITHIN_S

    assert w.stop() is not None
    assert processes_with_env("TOOLOPS_DATA_DIR", str(w.data_dir)) == []
