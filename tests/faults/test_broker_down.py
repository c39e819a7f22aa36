"""The broker down while calls, aborts and decisions go on (issue 18): nothing listens
where ToolOps' Redis broker should be. The database is the queue and a message only
wakes a worker, so an agent's call, an abort and a reviewer's decision are each taken
at once — a wake-up that cannot be sent is given up in milliseconds (one try, one retry
on a fresh connection; settings.py), not after Celery's default retries — and once the
broker is back the sweeps find every compensation and approved call whose message was
never sent."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
from rest_framework.test import APIClient

from tests.conftest import Shop
from tests.console.conftest import PASSWORD, make_user
from tests.faults.redis_proc import RedisServer, needs_redis_server, timed
from tests.toolops.executor.helpers import allow_without_approval
from tests.worker import Worker, wait_for
from toolops.models import Agent, Approval, Run, ToolCall

STOCK = {"sku": "A12", "qty": 1}
ORDER = {"sku": "A12", "qty": 1, "amount": "19.90"}
CHARGE = {"order_id": "ord-9", "amount": "199.00"}
FAST_SWEEPS = {
    "TOOLOPS_COMPENSATION_SWEEP_S": "0.5",
    "TOOLOPS_COMPENSATION_GRACE_S": "1",
    "TOOLOPS_APPROVAL_SWEEP_S": "0.5",
    "TOOLOPS_APPROVAL_GRACE_S": "1",
}
# A request that sends a wake-up must not wait on the broker: Celery's default publish
# retries took 0.6 to 0.9 s per message against a refused connection.
QUICK_S = 0.4


def reviewer_login(http: httpx.Client) -> None:
    login = http.get("/console/login/")
    done = http.post(
        "/console/login/",
        data={
            "username": "rita",
            "password": PASSWORD,
            "csrfmiddlewaretoken": login.cookies["csrftoken"],
        },
    )
    assert done.status_code == 302, done.text


@needs_redis_server
def test_calls_aborts_and_decisions_are_taken_at_once_and_done_when_the_broker_returns(
    worker: Callable[..., Worker],
    toolops_server: Callable[..., Any],
    agent_a: tuple[Agent, str],
    api: APIClient,
    shop: Shop,
    django_user_model: Any,
) -> None:
    broker = RedisServer()  # not started: the broker is down
    env = {"CELERY_BROKER_URL": broker.url()}
    allow_without_approval("create_order")
    make_user(django_user_model, "rita", "reviewers")
    server = toolops_server(**env)
    auth = {"Authorization": f"Bearer {agent_a[1]}"}
    took: dict[str, float] = {}
    with httpx.Client(base_url=server.url, headers=auth, timeout=30) as agent:
        for run_id in ("r-0", "r-1", "r-2"):
            assert agent.post("/api/v1/runs", json={"run_id": run_id}).status_code == 201
        # The process's first wake-up imports the broker's client (0.4 s, broker up or
        # down): an abort before the measured ones pays for it.
        agent.post(
            "/api/v1/runs/r-0/calls", json={"step_index": 1, "tool": "reserve_stock", "args": STOCK}
        )
        assert agent.post("/api/v1/runs/r-0/abort", json={"reason": "warm"}).status_code == 202
        calls = "/api/v1/runs/r-1/calls"
        took["call"], reserved = timed(
            agent, "POST", calls, json={"step_index": 1, "tool": "reserve_stock", "args": STOCK}
        )
        _, ordered = timed(
            agent, "POST", calls, json={"step_index": 2, "tool": "create_order", "args": ORDER}
        )
        assert [reserved.json()["status"], ordered.json()["status"]] == ["succeeded"] * 2
        took["abort"], aborted = timed(
            agent, "POST", "/api/v1/runs/r-1/abort", json={"reason": "customer left"}
        )
        assert aborted.status_code == 202, aborted.text
        _, held = timed(
            agent,
            "POST",
            "/api/v1/runs/r-2/calls",
            json={"step_index": 1, "tool": "charge", "args": CHARGE},
        )
        assert held.json()["status"] == "pending_approval", held.text
    approval = Approval.objects.get()
    with httpx.Client(base_url=server.url, timeout=30) as reviewer:
        reviewer_login(reviewer)
        page = reviewer.get(f"/console/approvals/{approval.approval_id}/")
        took["decision"], decided = timed(
            reviewer,
            "POST",
            f"/console/approvals/{approval.approval_id}/decide/",
            data={
                "decision": "approve",
                "note": "",
                "args_hash": approval.args_hash,
                "confirmed": "1",
                "csrfmiddlewaretoken": page.cookies.get("csrftoken")
                or reviewer.cookies["csrftoken"],
            },
        )
    assert decided.status_code in (200, 302), decided.text
    assert Approval.objects.get().status == "approved"
    assert max(took.values()) < QUICK_S, f"requests took {took} with the broker down"

    # The broker comes back, empty: no wake-up was ever sent. The sweeps find the work.
    broker.start()
    try:
        w = worker(**env, **FAST_SWEEPS)
        charge = ToolCall.objects.get(tool="charge")
        wait_for(lambda: Run.objects.get(run_id="r-1").status == "aborted", 40, w)
        wait_for(lambda: ToolCall.objects.get(pk=charge.pk).status == "succeeded", 40, w)
    finally:
        w.stop()
        broker.kill()
    assert Run.objects.get(run_id="r-0").status == "aborted"
    assert len(shop.requests("/inventory/reservations/release")) == 2
    assert len(shop.requests("/orders/cancel")) == 1
    assert len(shop.requests("/payments/charges")) == 1
