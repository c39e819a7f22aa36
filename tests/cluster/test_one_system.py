"""Three web processes, one worker and beat on PostgreSQL and Redis, behind HAProxy,
behave as one system (issue 19, item 2): what one process does, every other sees — a
breaker, a run's budget, an approval's decision, a live page's news, /metrics.

Each test addresses the processes one by one where its point is "on one … on another"
(round robin alone would not prove that two requests met different processes)."""

from __future__ import annotations

import hashlib
import queue
import random
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
import redis
from prometheus_client.parser import text_string_to_metric_families

from tests.browser import needs_chromium, open_page
from tests.chaos.history import History
from tests.chaos.workload import Reviewer
from tests.cluster.topology import Cluster
from tests.waiting import wait_until
from toolops.demo.shop.faults import Fault

ORDER = {"sku": "D9", "qty": 1, "amount": "12.50"}


def new_run(http: httpx.Client, web: str, budget: dict[str, int] | None = None) -> str:
    run_id = f"r-{uuid.uuid4().hex[:12]}"
    body: dict[str, Any] = {"run_id": run_id}
    if budget:
        body["budget"] = budget
    answer = http.post(f"{web}/api/v1/runs", json=body)
    assert answer.status_code == 201, answer.text
    return run_id


def call(
    http: httpx.Client, web: str, run_id: str, step: int, tool: str, args: dict[str, Any]
) -> httpx.Response:
    body = {"step_index": step, "tool": tool, "args": args, "tool_call_id": f"tc-{step}"}
    return http.post(f"{web}/api/v1/runs/{run_id}/calls", json=body)


def sent_for(cluster: Cluster, run_id: str, path: str) -> int:
    """Requests of `run_id` that reached the shop at `path`."""
    return sum(
        1
        for r in cluster.shop.logged_requests(path)
        if (r.get("headers") or {}).get("x-toolops-run-id") == run_id
    )


def reviewer_on(web: str, cluster: Cluster) -> Reviewer:
    """A reviewer logged in to the console of one web process."""
    username, password = cluster.reviewer
    reviewer = Reviewer(
        "reviewer",
        History(),
        [web],
        random.Random(0),
        threading.Event(),
        username=username,
        password=password,
        approvals=queue.Queue(),
    )
    assert reviewer.login(), f"the reviewer could not log in on {web}"
    return reviewer


def test_a_breaker_opened_on_one_process_refuses_on_the_others(cluster: Cluster) -> None:
    web1, web2, web3 = cluster.web_urls
    http = cluster.agent(0)
    path = "/legacy/inventory"  # legacy_inventory: its breaker opens after 3 failures
    cluster.shop.set_fault(path, Fault(fail_next=1000, fail_status=503))
    try:
        run_id = new_run(http, web1)
        # Calls on web1 only, until web1 itself refuses: the breaker opened there.
        for step in range(5):
            answer = call(http, web1, run_id, step, "legacy_inventory", {"sku": "D9"}).json()
            if (answer.get("error") or {}).get("reason") == "circuit_open":
                break
        else:
            pytest.fail(f"legacy_inventory's breaker never opened on web1: {answer}")
        sent = sent_for(cluster, run_id, path)
        assert sent >= 3

        # Another process refuses at once: nothing sent, 0 attempts, and it says so.
        for web, step in ((web2, 10), (web3, 11)):
            answer = call(http, web, run_id, step, "legacy_inventory", {"sku": "D9"}).json()
            assert answer["status"] == "failed", (web, answer)
            assert answer["error"]["reason"] == "circuit_open", (web, answer)
            assert answer["attempts"] == 0, (web, answer)
            tools = {t["name"]: t for t in http.get(f"{web}/api/v1/tools").json()["tools"]}
            assert tools["legacy_inventory"]["available"] is False, (web, tools)
            assert tools["legacy_inventory"]["available_at"], (web, tools)
        assert sent_for(cluster, run_id, path) == sent
    finally:
        cluster.shop.set_fault(path, None)


def test_a_runs_budget_holds_when_its_calls_land_on_different_processes(
    cluster: Cluster,
) -> None:
    limit = 6
    http = cluster.agent(1)
    # Every process, and the balancer, at once: 24 calls of one run, 6 attempts allowed.
    targets = [*cluster.web_urls, cluster.url] * 6
    run_id = new_run(http, cluster.web_urls[0], budget={"max_attempts": limit})
    # Slow answers, so that the calls overlap on every process.
    cluster.shop.set_fault("/inventory/stock", Fault(latency_ms=300))
    barrier = threading.Barrier(len(targets))

    def one(step: int) -> httpx.Response:
        barrier.wait(30)
        return call(http, targets[step], run_id, step, "query_stock", {"sku": "D9"})

    try:
        with ThreadPoolExecutor(len(targets)) as pool:
            answers = list(pool.map(one, range(len(targets))))
    finally:
        cluster.shop.set_fault("/inventory/stock", None)

    assert all(a.status_code in (200, 409) for a in answers), [a.text for a in answers]
    ran = [a.json() for a in answers if a.status_code == 200]
    succeeded = [c for c in ran if c["status"] == "succeeded"]
    # Never more requests than the budget, however the calls were spread...
    assert sent_for(cluster, run_id, "/inventory/stock") == len(succeeded) <= limit
    run = http.get(f"{cluster.web_urls[2]}/api/v1/runs/{run_id}").json()
    assert run["usage"]["attempts"] <= limit, run["usage"]
    # ...and the budget was used up, not left half spent by processes that each held a part.
    assert run["status"] == "budget_exhausted", run["status"]
    assert len(succeeded) == limit, [c["status"] for c in ran]
    refused = [a for a in answers if a.status_code == 409] + [
        c for c in ran if (c.get("error") or {}).get("reason") == "budget_exhausted"
    ]
    assert len(refused) == len(targets) - limit


def test_an_approval_decided_on_one_process_releases_a_long_poll_on_another(
    cluster: Cluster,
) -> None:
    web1, web2, web3 = cluster.web_urls
    http = cluster.agent(2)
    run_id = new_run(http, web1)
    held = call(http, web1, run_id, 0, "create_order", {**ORDER, "customer": run_id}).json()
    assert held["status"] == "pending_approval", held

    # The agent long-polls on web2...
    answers: list[httpx.Response] = []
    poll = f"{web2}/api/v1/calls/{held['call_id']}?wait=30"
    waiter = threading.Thread(target=lambda: answers.append(http.get(poll)), daemon=True)
    waiter.start()
    # ...and web2 holds it: its in-flight slot for this agent is in Redis (toolops/api/
    # inflight.py names each slot by the pid of the process serving the request).
    slots = redis.Redis(port=cluster.stack.redis_port, db=1)
    digest = hashlib.sha256(cluster.stack.tokens[2].encode()).hexdigest()[:32]
    web2_slot = f"toolops:inflight:{cluster.pid('web2')}:".encode()

    def held_by_web2() -> bool:
        members = slots.zrange(f"toolops:inflight:{digest}", 0, -1)
        return any(m.startswith(web2_slot) for m in members)

    wait_until(held_by_web2, 30, failure="web2 never held the long-poll")

    # A reviewer approves on web3; the worker runs the call.
    reviewer = reviewer_on(web3, cluster)
    reviewer.decide(f"{run_id}/tc-0", held["approval"]["approval_id"], approve=True)

    waiter.join(45)
    assert answers, "the long-poll on web2 never answered"
    # Answered with the outcome, not at its 30 s deadline with the call still waiting.
    assert answers[0].status_code == 200, answers[0].text
    assert answers[0].json()["status"] == "succeeded", answers[0].json()
    assert answers[0].json()["approval"]["status"] == "approved"
    assert sent_for(cluster, run_id, "/orders") == 1


@needs_chromium
def test_a_live_page_on_one_process_shows_a_change_made_through_another(
    cluster: Cluster,
) -> None:
    from playwright.sync_api import expect

    web1, web2, _ = cluster.web_urls
    username, password = cluster.reviewer
    http = cluster.agent(3)
    with open_page() as page:
        page.goto(f"{web1}/console/approvals/")
        page.get_by_label("User name").fill(username)
        page.get_by_label("Password").fill(password)
        page.get_by_role("button", name="Log in").click()
        table = page.locator("#approval-table")
        expect(table).to_have_attribute("data-live", "push")
        expect(page.locator("body")).to_have_attribute("data-push-connected", "1")

        # A new held call, made through web2's API: the queue open on web1 shows it,
        # without a reload (a pushed page does not poll).
        run_id = new_run(http, web2)
        held = call(http, web2, run_id, 0, "create_order", {**ORDER, "customer": run_id}).json()
        assert held["status"] == "pending_approval", held
        row = page.locator(f"#approval-{held['approval']['approval_id']}")
        expect(row).to_be_visible()
        expect(row).to_contain_text(run_id)
    http.post(f"{web2}/api/v1/runs/{run_id}/abort", json={"reason": "test over"})


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """The counters of a /metrics answer: (sample name, labels) → value."""
    found = {}
    for family in text_string_to_metric_families(text):
        if family.type != "counter":
            continue
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def test_metrics_totals_are_the_same_from_every_process(cluster: Cluster) -> None:
    webs = cluster.web_urls
    http = cluster.agent(0)

    def scrape() -> list[dict[Any, float]]:
        return [samples(httpx.get(f"{web}/metrics", timeout=10).text) for web in webs]

    def agreed() -> dict[Any, float] | None:
        found = scrape()
        return found[0] if all(f == found[0] for f in found) else None

    before = wait_until(agreed, 30, every=0.5, failure=lambda: str(scrape()))
    # On each process: two reads, and one reservation sent twice (its replay).
    for i, web in enumerate(webs):
        run_id = new_run(http, web)
        for step in (0, 1):
            assert call(http, web, run_id, step, "query_stock", {"sku": "D9"}).status_code == 200
        for _ in range(2):
            answer = call(http, web, run_id, 2, "reserve_stock", {"sku": "D9", "qty": 1 + i})
            assert answer.status_code == 200, answer.text
        http.post(f"{web}/api/v1/runs/{run_id}/complete")

    def count(metrics: dict[Any, float], name: str, **labels: str) -> float:
        return sum(
            v for (n, ls), v in metrics.items() if n == name and labels.items() <= dict(ls).items()
        )

    def grown() -> dict[Any, float] | None:
        found = agreed()
        if found is None:
            return None
        reads = count(found, "toolops_tool_calls_total", tool="query_stock", status="succeeded")
        replays = count(found, "toolops_idempotency_replays_total", tool="reserve_stock")
        old_reads = count(
            before, "toolops_tool_calls_total", tool="query_stock", status="succeeded"
        )
        old_replays = count(before, "toolops_idempotency_replays_total", tool="reserve_stock")
        return found if (reads - old_reads, replays - old_replays) == (6, 3) else None

    # Every process counts what all of them did (each answers from its last scrape for
    # TOOLOPS_METRICS_CACHE_S seconds: waited for, with a deadline).
    after = wait_until(grown, 45, every=0.5, failure=lambda: str(scrape()))
    assert (
        count(after, "toolops_tool_attempts_total", tool="reserve_stock")
        >= count(before, "toolops_tool_attempts_total", tool="reserve_stock") + 3
    )
