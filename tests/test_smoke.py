from __future__ import annotations

import httpx


def test_it_serves_a_call_through_a_real_server(toolops_server, agent_a, shop) -> None:
    server = toolops_server()
    headers = {"Authorization": f"Bearer {agent_a[1]}"}
    run = httpx.post(f"{server.url}/api/v1/runs", json={"run_id": "r-1"}, headers=headers)
    assert run.status_code == 201, run.text
    call = httpx.post(
        f"{server.url}/api/v1/runs/r-1/calls",
        json={"step_index": 0, "tool": "query_stock", "args": {"sku": "A12"}},
        headers=headers,
    )
    assert call.json()["status"] == "succeeded", call.text
    assert len(shop.requests("/inventory/stock")) == 1
