"""What a span says, checked in-process with the SDK's in-memory exporter: an unknown
outcome's call span waits for its settling, a hash that cannot confirm a redacted value,
and a tool the catalog does not have."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.utils import timezone
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from rest_framework.test import APIClient

from tests.conftest import Shop
from tests.toolops.executor.helpers import call_ok, start_run
from tests.toolops.executor.test_settle import ORDER, unknown_order
from toolops.executor.settle import call_reconcile, call_settle
from toolops.models import ToolCall
from traces import otel

Spans = Callable[[], list[Any]]
# Spans leave when what they describe commits: real commits here.
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def exported() -> Iterator[Spans]:
    exporter = InMemorySpanExporter()
    otel.setup(exporters=[exporter], instrument=False)

    def finished() -> list[Any]:
        otel.flush()
        return list(exporter.get_finished_spans())

    yield finished
    otel.reset_for_tests()


def names(spans: list[Any]) -> list[str]:
    return [s.name for s in spans]


def test_an_unknown_calls_span_goes_out_when_the_worker_settles_it(
    api: APIClient, shop: Shop, exported: Spans
) -> None:
    call = unknown_order(api, shop, timeout_next=1, hang_s=1)

    # Recorded unknown: its attempts and looks are out, the call span is not (not ended).
    assert "execute_tool create_order" not in names(exported())
    assert "POST create_order" in names(exported())

    shop.fault("/orders/lookup")  # the look-up answers again: no such order
    ToolCall.objects.filter(call_id=call["call_id"]).update(next_reconcile_at=timezone.now())
    assert call_reconcile(call_pk=ToolCall.objects.get(call_id=call["call_id"]).pk) == "failed"

    spans = exported()
    [span] = [s for s in spans if s.name == "execute_tool create_order"]
    assert span.attributes["toolops.status"] == "failed"
    assert span.end_time > span.start_time
    looks = [s for s in spans if s.name == "reconcile query_order"]
    assert looks and all(s.parent.span_id == span.context.span_id for s in looks)


def test_a_call_settled_by_a_person_exports_its_span(
    api: APIClient, shop: Shop, exported: Spans, django_user_model: Any
) -> None:
    call = unknown_order(api, shop, timeout_next=1, hang_s=1)
    row = ToolCall.objects.get(call_id=call["call_id"])
    olga = django_user_model.objects.create_user(username="olga")

    assert call_settle(call=row, by=olga, succeeded=True, note="seen", result={"order_id": "o"})

    [span] = [s for s in exported() if s.name == "execute_tool create_order"]
    assert span.attributes["toolops.status"] == "succeeded"


def test_the_args_hash_of_redacted_args_cannot_confirm_a_guess(
    api: APIClient, shop: Shop, exported: Spans
) -> None:
    start_run(api)
    plain = call_ok(api, step_index=0, tool="query_stock", args={"sku": "A12"})
    secret = call_ok(
        api,
        step_index=1,
        tool="send_notification",
        args={"to": "jane.doe@example.com", "message": "hello"},
    )

    by_call = {s.attributes["toolops.call_id"]: s for s in exported() if s.parent is None}
    assert (
        by_call[plain["call_id"]].attributes["toolops.args_hash"]
        == ToolCall.objects.get(call_id=plain["call_id"]).args_digest
    )
    hashed = by_call[secret["call_id"]].attributes["toolops.args_hash"]
    assert hashed.startswith("redacted:")
    assert ToolCall.objects.get(call_id=secret["call_id"]).args_digest not in hashed


def test_a_tool_the_catalog_does_not_have_is_named_unknown(
    api: APIClient, shop: Shop, exported: Spans
) -> None:
    start_run(api)
    call = call_ok(api, step_index=0, tool="create_ordr", args=ORDER)

    assert call["status"] == "failed"
    [span] = exported()
    assert span.name == "execute_tool (unknown)"
    assert span.attributes["gen_ai.tool.name"] == "(unknown)"
    assert span.attributes["error.type"] == "unknown_tool"
