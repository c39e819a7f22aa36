"""The observing scenarios: what a run leaves behind for the people who look at it.

- sensitive data: a notification whose args carry an e-mail address, a card number and an
  API key. The agent gets its whole result back; everything ToolOps stores, shows, logs
  and exports has them redacted, and only a `view_full_args` holder sees them, audited.
- metrics: a reservation retried twice, then sent again; `/metrics` (Prometheus text,
  computed from the database) counts the extra requests and the replay, and the console's
  Metrics page turns them into retry amplification and the idempotency hit rate.
"""

from __future__ import annotations

import re
import time

import httpx

from toolops.demo.scenario import CUSTOMER, Demo, Outcome, expect, expect_status

# A test card number (Luhn-valid) and a made-up key: what a careless prompt puts in args.
CARD = "4111 1111 1111 1111"
API_KEY = "sk-demo-7f3a9c2e41b8d605"


def sensitive_data(demo: Demo) -> Outcome:
    """An e-mail, a card number and an API key in a call's args."""
    api, run = demo.api, demo.new_run("sensitive-data")
    args = {
        "to": CUSTOMER,
        "message": f"Your card {CARD} was charged; reference key {API_KEY}",
        "api_key": API_KEY,
    }
    sent = api.call(run, 0, "send_notification", args, tool_call_id="tc-1")
    expect_status(sent, "succeeded")
    # The result is the agent's own data: it gets it whole, the e-mail included.
    expect((sent["result"] or {}).get("to") == CUSTOMER, "the agent did not get its full result")
    api.run_complete(run)
    return Outcome(
        True,
        f"run {run}: send_notification to {CUSTOMER} succeeded; on /console/runs/ the "
        "e-mail, card number and API key read [redacted] — the full args are a "
        "view_full_args page (admin), and every look is audited",
    )


def metrics(demo: Demo) -> Outcome:
    """Retries and a replay, as the metrics count them."""
    api, shop, run = demo.api, demo.shop, demo.new_run("metrics")
    before = _scrape(api.url)
    args = {"sku": demo.sku, "qty": 1}
    # A reservation honours Idempotency-Key, so its 503s are retried with the same key.
    with shop.fault("/inventory/reservations", fail_next=2, fail_status=503):
        first = api.call(run, 0, "reserve_stock", args)
    expect_status(first, "succeeded")
    expect(first["attempts"] == 3, f"reserve_stock took {first['attempts']} attempts, not 3")
    again = api.call(run, 0, "reserve_stock", dict(args))
    expect(again["replayed"] is True, "the second reserve_stock was not a replay")
    api.run_complete(run)
    after = _scrape(api.url)
    # A web process may answer from a scrape of the last few seconds
    # (TOOLOPS_METRICS_CACHE_S): ask again until these calls are in, or past any window.
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and (
        after["attempts"] - before["attempts"] < 3 or after["replays"] - before["replays"] < 1
    ):
        time.sleep(0.5)
        after = _scrape(api.url)
    attempts = after["attempts"] - before["attempts"]
    replays = after["replays"] - before["replays"]
    expect(attempts == 3, f"/metrics counted {attempts:g} reserve_stock attempts, not 3")
    expect(replays == 1, f"/metrics counted {replays:g} reserve_stock replays, not 1")
    return Outcome(
        True,
        f"run {run}: 3 requests for 1 reserve_stock call, then 1 replay of it; /metrics "
        "counted both — see amplification and hit rate at /console/metrics/",
    )


def _scrape(url: str) -> dict[str, float]:
    text = httpx.get(url.rstrip("/") + "/metrics", timeout=30).raise_for_status().text
    tool = 'tool="reserve_stock"'
    return {
        "attempts": _sum(text, "toolops_tool_attempts_total", tool),
        "replays": _sum(text, "toolops_idempotency_replays_total", tool),
    }


def _sum(text: str, name: str, label: str) -> float:
    pattern = re.compile(rf"^{name}\{{([^}}]*)\}} (\S+)$", re.MULTILINE)
    return sum(float(value) for labels, value in pattern.findall(text) if label in labels)
