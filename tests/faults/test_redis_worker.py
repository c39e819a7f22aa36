"""Redis restarted under a worker that holds an unacknowledged message (issue 18): ToolOps
with Redis as its Celery broker; a run's undo is on its way downstream (its task message
taken, not yet acknowledged: late acks) when the Redis server is killed (SIGKILL) and
started again on the same port. The worker's consumer drops its broken connection and, in
closing it, would hand the message back to a Redis it can no longer reach; kombu's Redis
transport then failed on the closed connection and the worker exited ("Unrecoverable
error"). The worker must carry on: it finishes the undo, reconnects, and takes the next
work from the restarted broker. The sweeps keep their default pace: the work after the
restart is done by the held task and by the new server's messages, not found by them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx

from tests.conftest import Shop
from tests.faults.redis_proc import RedisServer, needs_redis_server
from tests.faults.test_broker_down import ORDER, STOCK
from tests.toolops.executor.helpers import allow_without_approval
from tests.worker import Worker, wait_for
from toolops.models import Agent, Run


def order_then_abort(agent: httpx.Client, run_id: str) -> None:
    assert agent.post("/api/v1/runs", json={"run_id": run_id}).status_code == 201
    for step, (tool, args) in enumerate([("reserve_stock", STOCK), ("create_order", ORDER)]):
        done = agent.post(
            f"/api/v1/runs/{run_id}/calls", json={"step_index": step, "tool": tool, "args": args}
        )
        assert done.json()["status"] == "succeeded", done.text
    aborted = agent.post(f"/api/v1/runs/{run_id}/abort", json={"reason": "customer left"})
    assert aborted.status_code == 202, aborted.text


@needs_redis_server
def test_a_worker_holding_an_unacknowledged_message_outlives_a_redis_restart(
    worker: Callable[..., Worker],
    toolops_server: Callable[..., Any],
    agent_a: tuple[Agent, str],
    shop: Shop,
) -> None:
    redis = RedisServer()
    redis.start()
    env = {"CELERY_BROKER_URL": redis.url(1)}
    allow_without_approval("create_order")
    server = toolops_server(**env)
    w = worker(**env)
    agent = httpx.Client(
        base_url=server.url, timeout=30, headers={"Authorization": f"Bearer {agent_a[1]}"}
    )
    try:
        # The undo is slow downstream: its task message is held, unacknowledged, while the
        # broker goes away under the worker.
        shop.fault("/orders/cancel", latency_ms=1500)
        order_then_abort(agent, "r-1")
        wait_for(lambda: len(shop.requests("/orders/cancel")) == 1, 20, w)
        redis.kill()
        # The worker drops its broken connection while the server is down, the undo still
        # running; the server then comes back, empty, on the same port.
        wait_for(lambda: "Connection to broker lost" in w.output(), 10, w)
        redis.start()

        wait_for(lambda: Run.objects.get(run_id="r-1").status == "aborted", 40, w)
        assert len(shop.requests("/orders/cancel")) == 1
        assert len(shop.requests("/inventory/reservations/release")) == 1

        # Reconnected: the next abort's undos reach the worker through the new server.
        order_then_abort(agent, "r-2")
        wait_for(lambda: Run.objects.get(run_id="r-2").status == "aborted", 40, w)
        assert len(shop.requests("/orders/cancel")) == 2
        assert len(shop.requests("/inventory/reservations/release")) == 2
        assert w.proc.poll() is None, w.output()
        assert "Unrecoverable error" not in w.output(), w.output()
    finally:
        agent.close()
        w.stop()
        redis.kill()
