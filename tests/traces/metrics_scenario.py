"""A scripted scenario with known retries and replays, through the real API against the
real shop, and what the metrics must say about it.

query_stock: two calls each refused once with 503 and then answered (2 requests each),
one clean call (1 request): 5 requests for 3 logical calls, amplification 5/3; the two
retried calls sent again with their tool_call_ids: 2 replays, hit rate 2 / (2 + 3).
reserve_stock: one write (1 request), sent again without a tool_call_id (a replay by its
idempotency key): amplification 1, hit rate 1 / (1 + 1)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import Shop

Post = Callable[[str, dict[str, Any]], tuple[int, dict[str, Any]]]

# (metric sample name, labels) → value, every sample the scenario must produce exactly.
EXPECTED = {
    ("toolops_tool_calls_total", (("status", "succeeded"), ("tool", "query_stock"))): 3,
    ("toolops_tool_calls_total", (("status", "succeeded"), ("tool", "reserve_stock"))): 1,
    ("toolops_tool_calls_sent_total", (("tool", "query_stock"),)): 3,
    ("toolops_tool_calls_sent_total", (("tool", "reserve_stock"),)): 1,
    ("toolops_tool_attempts_total", (("outcome", "ok"), ("tool", "query_stock"))): 3,
    ("toolops_tool_attempts_total", (("outcome", "retry"), ("tool", "query_stock"))): 2,
    ("toolops_tool_attempts_total", (("outcome", "ok"), ("tool", "reserve_stock"))): 1,
    ("toolops_idempotency_replays_total", (("tool", "query_stock"),)): 2,
    ("toolops_idempotency_replays_total", (("tool", "reserve_stock"),)): 1,
    ("toolops_tool_call_duration_seconds_count", (("tool", "query_stock"),)): 3,
    ("toolops_tool_call_duration_seconds_count", (("tool", "reserve_stock"),)): 1,
}


def run_scenario(post: Post, shop: Shop, run_id: str = "r-metrics") -> None:
    status, _ = post("/api/v1/runs", {"run_id": run_id})
    assert status == 201
    calls = f"/api/v1/runs/{run_id}/calls"
    retried = [
        {"step_index": 0, "tool": "query_stock", "args": {"sku": "A12"}, "tool_call_id": "tc-0"},
        {"step_index": 1, "tool": "query_stock", "args": {"sku": "D9"}, "tool_call_id": "tc-1"},
    ]
    for body in retried:
        shop.fault("/inventory/stock", fail_next=1, fail_status=503)
        status, call = post(calls, body)
        assert (status, call["status"], call["attempts"]) == (200, "succeeded", 2), call
    clean = {"step_index": 2, "tool": "query_stock", "args": {"sku": "B7"}, "tool_call_id": "tc-2"}
    status, call = post(calls, clean)
    assert (status, call["status"], call["attempts"]) == (200, "succeeded", 1), call
    write = {"step_index": 3, "tool": "reserve_stock", "args": {"sku": "A12", "qty": 1}}
    status, call = post(calls, write)
    assert (status, call["status"], call["replayed"]) == (200, "succeeded", False), call

    # The same calls again: answered from what is recorded, nothing sent.
    for body in [*retried, write]:
        status, call = post(calls, body)
        assert (status, call["replayed"]) == (200, True), call

    assert len(shop.requests("/inventory/stock")) == 5
    assert len(shop.requests("/inventory/reservations")) == 1


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of a Prometheus text exposition: (name, sorted labels) → value."""
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def amplification(found: dict[tuple[str, tuple[tuple[str, str], ...]], float], tool: str) -> float:
    """docs/metrics.md's PromQL, on one scrape's totals:
    sum by (tool) (toolops_tool_attempts_total) / toolops_tool_calls_sent_total."""
    requests = sum(
        v
        for (name, labels), v in found.items()
        if name == "toolops_tool_attempts_total" and ("tool", tool) in labels
    )
    return requests / found[("toolops_tool_calls_sent_total", (("tool", tool),))]


def hit_rate(found: dict[tuple[str, tuple[tuple[str, str], ...]], float], tool: str) -> float:
    """replays / (replays + sum by (tool) (toolops_tool_calls_total))."""
    calls = sum(
        v
        for (name, labels), v in found.items()
        if name == "toolops_tool_calls_total" and ("tool", tool) in labels
    )
    replays = found[("toolops_idempotency_replays_total", (("tool", tool),))]
    return replays / (replays + calls)
