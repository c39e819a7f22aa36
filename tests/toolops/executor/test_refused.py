"""An orders service that refuses connections, then comes back: a refused connection
provably sent nothing, so the write is retried with the same key and client_reference,
and exactly one order exists."""

from __future__ import annotations

import threading
from typing import Any

import httpx
from rest_framework.test import APIClient

from tests.conftest import free_port
from tests.toolops.executor.helpers import (
    allow_without_approval,
    call_ok,
    start_run,
    tool_toml,
)
from toolops.demo.shop import start_shop

ORDER_SCHEMA = {
    "type": "object",
    "required": ["sku", "qty", "amount"],
    "properties": {
        "sku": {"type": "string"},
        "qty": {"type": "integer", "minimum": 1},
        "amount": {"type": "string", "format": "decimal"},
    },
}


def test_it_retries_a_refused_write_with_the_same_reference(
    api: APIClient, catalog: Any, db: None
) -> None:
    port = free_port()
    catalog(
        tool_toml(
            name="create_order_late",
            kind="compensable_write",
            url=f"http://127.0.0.1:{port}/orders",
            timeout_s=2.0,
            max_attempts=5,
            backoff_base_s=0.3,
            client_reference="client_reference",
            query="query_order",
            compensation={"tool": "cancel_order", "args": {"order_id": "$.result.order_id"}},
            params_schema=ORDER_SCHEMA,
        )
    )
    allow_without_approval("create_order_late")
    started: list[Any] = []
    # Nothing listens on the port yet; the service comes up while ToolOps backs off.
    later = threading.Timer(0.4, lambda: started.append(start_shop(port=port)))
    later.start()
    try:
        start_run(api)
        body = call_ok(
            api,
            step_index=0,
            tool="create_order_late",
            args={"sku": "A12", "qty": 1, "amount": "19.90"},
        )
        later.join()
        server, url = started[0]
        requests = httpx.get(f"{url}/_shop/requests", params={"path": "/orders"}).json()["requests"]
        orders = httpx.get(f"{url}/_shop/state").json()["orders"]
    finally:
        later.cancel()
        for server, _ in started:
            server.shutdown()

    assert body["status"] == "succeeded", body
    assert body["attempts"] >= 2  # at least one refused attempt, then the one that landed
    assert len(requests) == 1  # refused attempts never reached it
    assert len(orders) == 1
    assert orders[0]["client_reference"] == requests[0]["body"]["client_reference"]
    assert body["result"]["order_id"] == orders[0]["order_id"]
