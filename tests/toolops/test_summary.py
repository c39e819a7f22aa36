"""A run's summary (API.md "Runs"): when any call failed, was skipped, degraded, rejected
or is unknown, its FIRST sentence begins "Based on partial data" and says what is
missing; `last_succeeded_tool_call_id` says where the run stopped."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from rest_framework.test import APIClient

from tests.conftest import Shop
from tests.toolops.executor.helpers import allow_without_approval, call_ok, get_run, start_run
from toolops.models import ToolCall
from toolops.summary import abort_text, last_succeeded, run_summary

PARTIAL = "Based on partial data"
T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def first_sentence(text: str) -> str:
    # Tool names and ids hold no spaces, so the first sentence ends at the first ". ".
    head, sep, _ = text.partition(". ")
    return f"{head}." if sep else text


def clause(sentence: str, tool_call_id: str) -> str:
    """What the sentence says about one call: from its id to the next ';' or '.'."""
    start = sentence.index(f"({tool_call_id})")
    rest = sentence[start:]
    return rest[: min(i for i in (rest.find(";"), rest.find(". "), len(rest)) if i >= 0)]


# -- through the API ---------------------------------------------------------------------


def test_it_says_first_that_the_data_is_partial_and_names_the_failed_calls(
    api: APIClient, shop: Shop
) -> None:
    start_run(api)
    call_ok(api, step_index=0, tool="query_stock", args={"sku": "A12"}, tool_call_id="tc-1")
    call_ok(api, step_index=1, tool="search_products", args={"q": "coffee"}, tool_call_id="tc-2")
    call_ok(api, step_index=2, tool="query_stock", args={"sku": "NOPE"}, tool_call_id="tc-3")
    call_ok(api, step_index=3, tool="query_stock", args={"sku": "D9"}, tool_call_id="tc-4")
    big = {"sku": "B7", "qty": 1000}  # more than the shop holds: 409
    call_ok(api, step_index=4, tool="reserve_stock", args=big, tool_call_id="tc-5")

    run = get_run(api)

    statuses = [c["status"] for c in run["calls"]]
    assert statuses == ["succeeded", "succeeded", "failed", "succeeded", "failed"]
    head = first_sentence(run["summary"])
    assert head.startswith(PARTIAL), run["summary"]
    assert "3 of 5" in head
    assert "query_stock (tc-3)" in head
    assert "reserve_stock (tc-5)" in head
    assert "failed" in clause(head, "tc-3")
    for ok in ("tc-1", "tc-2", "tc-4"):
        assert ok not in head
    assert run["last_succeeded_tool_call_id"] == "tc-4"
    # Completing the run keeps the summary as it was.
    completed = api.post("/api/v1/runs/r-1/complete").json()
    assert completed["summary"] == run["summary"]


def test_it_says_nothing_of_partial_data_when_every_call_succeeded(
    api: APIClient, shop: Shop
) -> None:
    start_run(api)
    call_ok(api, step_index=0, tool="query_stock", args={"sku": "A12"}, tool_call_id="tc-1")
    call_ok(api, step_index=1, tool="search_products", args={"q": "milk"}, tool_call_id="tc-2")
    call_ok(
        api,
        step_index=2,
        tool="reserve_stock",
        args={"sku": "A12", "qty": 1},
        tool_call_id="tc-3",
        depends_on=["tc-1"],
    )

    run = get_run(api)

    assert [c["status"] for c in run["calls"]] == ["succeeded"] * 3
    assert "partial" not in run["summary"].lower()
    assert first_sentence(run["summary"]) == "All 3 of 3 tool calls succeeded."
    assert run["last_succeeded_tool_call_id"] == "tc-3"


def test_a_run_without_calls_has_no_last_succeeded_call(api: APIClient, shop: Shop) -> None:
    start_run(api)

    run = get_run(api)

    assert run["last_succeeded_tool_call_id"] is None
    assert "partial" not in run["summary"].lower()


def skipped(api: APIClient, shop: Shop) -> None:
    call_ok(api, step_index=0, tool="query_stock", args={"sku": "A12"}, tool_call_id="tc-0")
    shop.fault("/inventory/stock", fail_next=3, fail_status=503)
    call_ok(api, step_index=1, tool="query_stock", args={"sku": "B7"}, tool_call_id="tc-b")
    call_ok(
        api,
        step_index=2,
        tool="reserve_stock",
        args={"sku": "B7", "qty": 1},
        tool_call_id="tc-1",
        depends_on=["tc-b"],
    )


def degraded(api: APIClient, shop: Shop) -> None:
    call_ok(api, step_index=0, tool="query_stock", args={"sku": "A12"}, tool_call_id="tc-0")
    shop.fault("/catalog/search", fail_next=5, fail_status=503)
    call_ok(api, step_index=1, tool="search_products", args={"q": "coffee"}, tool_call_id="tc-1")


def unknown_after_reset(api: APIClient, shop: Shop) -> None:
    call_ok(api, step_index=0, tool="query_stock", args={"sku": "A12"}, tool_call_id="tc-0")
    allow_without_approval("create_order")
    shop.fault("/orders", drop_after_commit=1)
    shop.fault("/orders/lookup", fail_next=10, fail_status=500)
    order = {"sku": "A12", "qty": 1, "amount": "5.00"}
    call_ok(api, step_index=1, tool="create_order", args=order, tool_call_id="tc-1")


def unknown_after_timeout(api: APIClient, shop: Shop) -> None:
    call_ok(api, step_index=0, tool="query_stock", args={"sku": "A12"}, tool_call_id="tc-0")
    allow_without_approval("create_order", timeout_s=0.5)
    shop.fault("/orders", hang_after_commit_s=1)
    shop.fault("/orders/lookup", fail_next=10, fail_status=500)
    order = {"sku": "A12", "qty": 1, "amount": "5.00"}
    call_ok(api, step_index=1, tool="create_order", args=order, tool_call_id="tc-1")
    shop.fault("/orders")


# (how the run gets its calls after tc-0, their statuses, a word the summary must say of tc-1)
DISCLOSED = {
    "skipped": (skipped, ["failed", "skipped"], "skipped"),
    "degraded": (degraded, ["degraded"], "partial"),
    "unknown after a reset": (unknown_after_reset, ["unknown"], "unknown"),
    "unknown after a timeout": (unknown_after_timeout, ["unknown"], "unknown"),
}


@pytest.mark.parametrize("case", DISCLOSED.values(), ids=DISCLOSED.keys())
def test_it_discloses_each_kind_of_missing_data_in_the_first_sentence(
    api: APIClient, shop: Shop, case: tuple[Any, list[str], str]
) -> None:
    make, statuses, word = case
    start_run(api)
    make(api, shop)

    run = get_run(api)

    assert [c["status"] for c in run["calls"]] == ["succeeded", *statuses]
    head = first_sentence(run["summary"])
    assert head.startswith(PARTIAL), run["summary"]
    assert f"1 of {1 + len(statuses)}" in head
    said = clause(head, "tc-1")
    assert word in said, f"the summary says of tc-1 {said!r}, not {word!r}: {run['summary']}"
    assert run["last_succeeded_tool_call_id"] == "tc-0"


# -- run_summary and last_succeeded, unit by unit ----------------------------------------


def call(
    n: int, status: str, *, tool: str = "query_stock", reason: str = "", finished: int | None = None
) -> ToolCall:
    created = T0 + timedelta(seconds=n)
    done = None if finished is None else T0 + timedelta(seconds=finished)
    return ToolCall(
        pk=n,
        tool=tool,
        tool_call_id=f"tc-{n}",
        step_index=n,
        status=status,
        error_reason=reason,
        created_at=created,
        finished_at=done,
    )


def test_it_summarises_no_calls() -> None:
    assert run_summary([]) == "No tool calls yet."
    assert last_succeeded([]) is None


def test_it_counts_calls_that_all_succeeded() -> None:
    assert run_summary([call(1, "succeeded")]) == "All 1 of 1 tool call succeeded."
    calls = [call(1, "succeeded"), call(2, "succeeded")]
    assert run_summary(calls) == "All 2 of 2 tool calls succeeded."


def test_it_follows_the_design_example() -> None:
    calls = [call(n, "succeeded") for n in (1, 2, 3)]
    calls += [
        call(4, "failed", tool="search", reason="timeout"),
        call(5, "failed", tool="charge", reason="downstream_error"),
    ]

    summary = run_summary(calls)

    assert summary == (
        "Based on partial data: 3 of 5 tool calls succeeded; search (tc-4) timed out; "
        "charge (tc-5) failed."
    )


STATUS_WORDS = [
    ("failed", "downstream_error", "failed"),
    ("failed", "circuit_open", "unavailable"),
    ("failed", "budget_exhausted", "budget"),
    ("failed", "invalid_args", "invalid args"),
    ("skipped", "dependency_failed", "skipped"),
    ("degraded", "result_invalid", "partial"),
    ("degraded", "downstream_error", "partial"),
    ("rejected", "rejected", "rejected"),
    ("rejected", "expired", "not approved in time"),
    ("unknown", "downstream_error", "unknown"),
    ("unknown", "timeout", "unknown"),
]


@pytest.mark.parametrize(("status", "reason", "word"), STATUS_WORDS)
def test_it_discloses_each_status_in_the_first_sentence(
    status: str, reason: str, word: str
) -> None:
    summary = run_summary([call(1, "succeeded"), call(2, status, tool="x", reason=reason)])

    head = first_sentence(summary)
    assert head.startswith(f"{PARTIAL}: 1 of 2 tool calls succeeded;"), summary
    said = clause(head, "tc-2")
    assert said.startswith("(tc-2)")
    assert word in said, f"{status}/{reason} is described as {said!r}, not {word!r}"


def test_it_names_five_problems_and_counts_the_rest() -> None:
    calls = [call(n, "failed", tool=f"t{n}") for n in range(1, 8)]

    head = first_sentence(run_summary(calls))

    assert head.startswith(f"{PARTIAL}: 0 of 7 tool calls succeeded;")
    assert all(f"t{n} (tc-{n})" in head for n in range(1, 6))
    assert "t6" not in head and "t7" not in head
    assert head.endswith("; and 2 more.")


def test_a_waiting_call_is_not_partial_data_but_is_said() -> None:
    calls = [call(1, "succeeded"), call(2, "pending_approval", tool="create_order")]

    summary = run_summary(calls)

    assert "partial" not in summary.lower()
    assert first_sentence(summary) == "1 of 2 tool calls succeeded so far."
    assert "create_order (tc-2) is waiting for approval" in summary


def test_partial_data_comes_before_what_is_still_waiting() -> None:
    calls = [
        call(1, "failed", tool="query_stock"),
        call(2, "in_progress", tool="charge"),
        call(3, "succeeded"),
    ]

    summary = run_summary(calls)

    head = first_sentence(summary)
    assert head.startswith(f"{PARTIAL}: 1 of 3 tool calls succeeded;")
    assert "query_stock (tc-1)" in head and "charge" not in head
    assert "charge (tc-2) is still running" in summary


def test_the_last_succeeded_call_is_the_latest_one_that_succeeded() -> None:
    calls = [
        call(1, "succeeded", finished=1),
        call(2, "succeeded", finished=2),
        call(3, "failed", finished=3),
        call(4, "unknown"),
    ]

    assert last_succeeded(calls) == "tc-2"
    assert last_succeeded([call(1, "failed"), call(2, "skipped")]) is None


def test_the_last_succeeded_call_is_where_the_run_stopped_not_the_last_settled() -> None:
    # tc-1 was unknown and the worker settled it as succeeded after tc-2 had finished:
    # the run still got as far as tc-2 (DESIGN.md: "where did the run stop").
    calls = [
        call(1, "succeeded", tool="create_order", finished=60),
        call(2, "succeeded", finished=3),
        call(3, "failed", finished=4),
    ]

    assert last_succeeded(calls) == "tc-2"


def test_an_aborted_runs_summary_says_what_was_undone_and_what_was_not() -> None:
    calls = [ToolCall(tool="charge", tool_call_id=f"tc-{i}", status="succeeded") for i in range(3)]
    undo = [
        ("refund", "dead_lettered"),
        ("refund", "resolved"),
        ("release_stock", "succeeded"),
        ("release_stock", "succeeded"),
    ]

    text = abort_text(status="compensation_failed", calls=calls, undo=undo)

    assert text == (
        "Aborted after 3 of 3 tool calls succeeded; failed to undo: refund (a support ticket "
        "is open); fixed by hand: refund; undone: release_stock ×2."
    )
    assert abort_text(status="aborted", calls=calls, undo=[]) == (
        "Aborted after 3 of 3 tool calls succeeded; nothing needed undoing."
    )
