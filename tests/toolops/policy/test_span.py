"""A call's span records the agent policy's word on it (API.md "Agent policy": each call
and its span record `policy_version` and the rules that decided), checked with the SDK's
in-memory exporter."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from rest_framework.test import APIClient

from tests.conftest import Shop
from tests.toolops.api.helpers import create_run
from tests.toolops.policy.flow import call
from tests.toolops.policy.helpers import apply_policy
from traces import otel

Spans = Callable[[], list[Any]]
# Spans leave when what they describe commits: real commits here.
pytestmark = pytest.mark.django_db(transaction=True)

POLICY = """
[[rule]]
name = "watch reservations"
agents = ["*"]
tools = ["reserve_stock"]
when = 'context.args.qty > 0'
action = "refuse"
mode = "log_only"

[[rule]]
name = "bulk"
agents = ["*"]
tools = ["reserve_stock"]
when = 'context.args.qty > 5'
action = "refuse"
"""


@pytest.fixture
def exported() -> Iterator[Spans]:
    exporter = InMemorySpanExporter()
    otel.setup(exporters=[exporter], instrument=False)

    def finished() -> list[Any]:
        otel.flush()
        return list(exporter.get_finished_spans())

    yield finished
    otel.reset_for_tests()


def call_span(spans: list[Any], call_id: str) -> Any:
    [span] = [
        s
        for s in spans
        if s.name.startswith("execute_tool ") and s.attributes.get("toolops.call_id") == call_id
    ]
    return span


def test_it_exports_the_policy_version_and_rules_on_the_call_span(
    api: APIClient, shop: Shop, exported: Spans
) -> None:
    create_run(api, "r-1")
    before = call(api, 0, "reserve_stock", sku="A12", qty=1)
    version = apply_policy(POLICY)

    ran = call(api, 1, "reserve_stock", sku="A12", qty=1)
    refused = call(api, 2, "reserve_stock", sku="A12", qty=9)

    spans = exported()
    assert ran["status"] == "succeeded" and refused["status"] == "failed"
    span = call_span(spans, ran["call_id"])
    assert span.attributes["toolops.policy.version"] == version.number
    assert list(span.attributes["toolops.policy.rules"]) == ["would_refuse: watch reservations"]
    span = call_span(spans, refused["call_id"])
    assert span.attributes["toolops.policy.version"] == version.number
    assert list(span.attributes["toolops.policy.rules"]) == [
        "would_refuse: watch reservations",
        "bulk",
    ]
    # Without a policy in force, the span says nothing of one.
    span = call_span(spans, before["call_id"])
    assert "toolops.policy.version" not in span.attributes
    assert "toolops.policy.rules" not in span.attributes
