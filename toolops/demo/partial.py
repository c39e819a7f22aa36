"""The demo agent's scenarios of a run that only partly worked: a call skipped because
the call it depends on failed, a search that ends degraded instead of failed, and the
summary that says "Based on partial data". Each sets the shop's fault for the condition
it shows and clears it afterwards, whatever happens."""

from __future__ import annotations

from toolops.demo.clients import JSON
from toolops.demo.scenario import (
    STOCKED_SKUS,
    Demo,
    Outcome,
    expect,
    expect_status,
    plural,
    quote,
)


def dependency(demo: Demo) -> Outcome:
    """A call that depends on a failed call is skipped, and nothing is sent."""
    api, shop, run = demo.api, demo.shop, demo.new_run("dependency")
    lookup = api.call(run, 0, "query_stock", {"sku": "NO-SUCH-SKU"}, tool_call_id="tc-1")
    expect_status(lookup, "failed")
    reserve = api.call(
        run,
        1,
        "reserve_stock",
        {"sku": demo.sku, "qty": 1},
        tool_call_id="tc-2",
        depends_on=["tc-1"],
    )
    expect_status(reserve, "skipped")
    reason = (reserve["error"] or {}).get("reason")
    expect(reason == "dependency_failed", f"skipped with reason {reason}")
    expect(
        not shop.requests_for_run("/inventory/reservations", run),
        "the skipped reservation reached the shop",
    )
    summary = api.run_complete(run)["summary"]
    return Outcome(
        True,
        f"run {run}: query_stock failed (unknown SKU), reserve_stock skipped; "
        f"summary {quote(summary, 80)}",
    )


def degraded_search(demo: Demo) -> Outcome:
    """search_products is down: with allow_partial its call ends degraded, not failed, and
    a query_stock that depends on it still runs."""
    api, shop, run = demo.api, demo.shop, demo.new_run("degraded-search")
    with shop.fault("/catalog/search", fail_next=5, fail_status=503):
        search = api.call(run, 0, "search_products", {"q": "coffee"}, tool_call_id="tc-1")
    expect_status(search, "degraded")
    stock = api.call(
        run, 1, "query_stock", {"sku": demo.sku}, tool_call_id="tc-2", depends_on=["tc-1"]
    )
    expect_status(stock, "succeeded")
    summary = api.run_complete(run)["summary"]
    expect(summary.startswith("Based on partial data"), f"the summary is {quote(summary)}")
    return Outcome(
        True,
        f"run {run}: search_products degraded after {plural(search['attempts'], 'attempt')} "
        f"{quote(search['feedback'], 90)}; query_stock (depends_on it) still ran: "
        f"{stock['result']['available']} units of {demo.sku}; summary {quote(summary, 100)}",
    )


def partial_summary(demo: Demo) -> Outcome:
    """Three calls succeed and two fail: the run's summary says so in its first sentence."""
    api, run = demo.api, demo.new_run("partial-summary")
    plan: list[tuple[str, JSON]] = [
        ("query_stock", {"sku": demo.sku}),
        ("search_products", {"q": "coffee"}),
        ("query_stock", {"sku": "NO-SUCH-SKU"}),  # the shop answers 404
        ("query_stock", {"sku": STOCKED_SKUS[1]}),
        ("reserve_stock", {"sku": demo.sku, "qty": 1_000_000}),  # more than in stock: 409
    ]
    calls = [
        api.call(run, step, tool, args, tool_call_id=f"tc-{step + 1}")
        for step, (tool, args) in enumerate(plan)
    ]
    statuses = [c["status"] for c in calls]
    expected = ["succeeded", "succeeded", "failed", "succeeded", "failed"]
    expect(statuses == expected, f"the calls ended {statuses}, not {expected}")
    ended = api.run_complete(run)
    summary = ended["summary"]
    expect(
        summary.startswith("Based on partial data: 3 of 5"),
        f"the summary does not start with “Based on partial data: 3 of 5”: {quote(summary)}",
    )
    return Outcome(
        True,
        f"run {run}: 3 calls succeeded, 2 failed; last succeeded "
        f"{ended['last_succeeded_tool_call_id']}; summary {quote(summary, 220)}",
    )
