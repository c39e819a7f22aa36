"""Redis restarted (issue 18): ToolOps with Redis as its Celery broker and Channels layer;
the Redis server is killed (SIGKILL) and started again empty on the same port while an
abort's undos run, an approval's decision is on its way and a reviewer's live page is
open. The database is the source of truth: the compensations end done once each, the
approved call runs once, the worker and the web process carry on without a restart, and
the live page is told of changes again — its socket is either still heard, or closed so
that the page reconnects (static/console/console.js) and fetches what it shows."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import suppress
from typing import Any

import httpx
from rest_framework.test import APIClient
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from tests.conftest import Shop
from tests.console.conftest import make_user
from tests.faults.redis_proc import RedisServer, needs_redis_server
from tests.faults.test_broker_down import CHARGE, FAST_SWEEPS, ORDER, STOCK, reviewer_login
from tests.toolops.executor.helpers import allow_without_approval
from tests.worker import Worker, wait_for
from toolops.models import Agent, Approval, Run, ToolCall

PUSH_PATH = "/ws/approvals/"


def live_page(server: Any, cookies: httpx.Cookies) -> ClientConnection:
    """A reviewer's approval queue, as the page's script opens its socket."""
    url = server.url.replace("http://", "ws://") + PUSH_PATH
    cookie = "; ".join(f"{name}={value}" for name, value in cookies.items())
    return connect(
        url, additional_headers={"Cookie": cookie, "Origin": server.url}, open_timeout=10
    )


def heard(page: ClientConnection, timeout: float) -> str:
    """'pushed' when the page is told of a change, 'closed' when its socket ends (the page
    reconnects and fetches), 'silent' when neither happens in `timeout` s."""
    try:
        page.recv(timeout=timeout)
        return "pushed"
    except TimeoutError:
        return "silent"
    except ConnectionClosed:
        return "closed"


@needs_redis_server
def test_a_redis_restart_loses_no_compensation_approval_or_live_page(
    worker: Callable[..., Worker],
    toolops_server: Callable[..., Any],
    agent_a: tuple[Agent, str],
    api: APIClient,
    shop: Shop,
    django_user_model: Any,
) -> None:
    redis = RedisServer()
    redis.start()
    env = {"REDIS_URL": redis.url(0), "CELERY_BROKER_URL": redis.url(1), **FAST_SWEEPS}
    allow_without_approval("create_order")
    make_user(django_user_model, "rita", "reviewers")
    server = toolops_server(**env)
    w = worker(**env)
    agent = httpx.Client(
        base_url=server.url, timeout=30, headers={"Authorization": f"Bearer {agent_a[1]}"}
    )
    reviewer = httpx.Client(base_url=server.url, timeout=30)
    try:
        reviewer_login(reviewer)
        page = live_page(server, reviewer.cookies)
        for run_id in ("r-1", "r-2"):
            assert agent.post("/api/v1/runs", json={"run_id": run_id}).status_code == 201
        for step, (tool, args) in enumerate([("reserve_stock", STOCK), ("create_order", ORDER)]):
            done = agent.post(
                "/api/v1/runs/r-1/calls", json={"step_index": step, "tool": tool, "args": args}
            )
            assert done.json()["status"] == "succeeded", done.text
        held = agent.post(
            "/api/v1/runs/r-2/calls", json={"step_index": 1, "tool": "charge", "args": CHARGE}
        )
        assert held.json()["status"] == "pending_approval", held.text
        assert heard(page, 10) == "pushed"  # the page hears of the new approval

        # In flight: the run's first undo is slow downstream; the decision's message sent.
        shop.fault("/orders/cancel", latency_ms=1500)
        assert agent.post("/api/v1/runs/r-1/abort", json={"reason": "left"}).status_code == 202
        approval = Approval.objects.get()
        page_html = reviewer.get(f"/console/approvals/{approval.approval_id}/")
        decided = reviewer.post(
            f"/console/approvals/{approval.approval_id}/decide/",
            data={
                "decision": "approve",
                "note": "",
                "args_hash": approval.args_hash,
                "confirmed": "1",
                "csrfmiddlewaretoken": page_html.cookies.get("csrftoken")
                or reviewer.cookies["csrftoken"],
            },
        )
        assert decided.status_code in (200, 302), decided.text
        redis.restart()

        charge = ToolCall.objects.get(tool="charge")
        wait_for(lambda: Run.objects.get(run_id="r-1").status == "aborted", 40, w)
        wait_for(lambda: ToolCall.objects.get(pk=charge.pk).status == "succeeded", 40, w)
        assert len(shop.requests("/orders/cancel")) == 1
        assert len(shop.requests("/inventory/reservations/release")) == 1
        assert len(shop.requests("/payments/charges")) == 1

        # The web process carries on, and the live page with it. What the page heard
        # before the restart is read first; then a change made now must reach it: pushed
        # to the open socket, or the socket was closed and the page's new one hears it.
        before = drain(page)
        assert agent.post("/api/v1/runs", json={"run_id": "r-3"}).status_code == 201
        again = agent.post(
            "/api/v1/runs/r-3/calls", json={"step_index": 1, "tool": "charge", "args": CHARGE}
        )
        assert again.json()["status"] == "pending_approval", again.text
        outcome = "closed" if before == "closed" else heard(page, 10)
        assert outcome != "silent", "the open live page was told of no change after the restart"
        if outcome == "closed":
            # The page's script opens a new socket at once: the web process's pooled Redis
            # connections died with the server, and the first use of one is retried afresh
            # rather than refusing the page (HTTP 500) or dropping the push.
            with live_page(server, reviewer.cookies) as reopened:
                third = agent.post(
                    "/api/v1/runs/r-3/calls",
                    json={"step_index": 2, "tool": "charge", "args": {**CHARGE, "amount": "1.00"}},
                )
                assert third.json()["status"] == "pending_approval", third.text
                assert heard(reopened, 10) == "pushed"
        assert w.proc.poll() is None, w.output()
        assert server.proc.poll() is None
    finally:
        with suppress(Exception):
            page.close()
        agent.close()
        reviewer.close()
        w.stop()
        redis.kill()


def drain(page: ClientConnection) -> str:
    """Read what the page was told until it is told nothing for a second: 'closed' when
    its socket ended on the way, else 'silent'."""
    while (outcome := heard(page, 1.0)) == "pushed":
        pass
    return outcome
