"""Circuit breakers: shared through the database, one probe after the cool-down."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.db.models.functions import Now
from rest_framework.test import APIClient

from tests.conftest import Shop
from tests.waiting import wait_until
from toolops.executor import breaker
from toolops.models import CircuitBreaker
from toolops.tools import registry

FLAKY = """
[[tool]]
name = "flaky_stock"
kind = "read"
description = "query_stock behind its own breaker."
url = "{url}/inventory/stock"
max_attempts = 1
timeout_s = 2.0
breaker = {{ consecutive_failures = 3, min_calls = 100, cooldown_s = {cooldown} }}
params_schema = {{ type = "object", properties = {{ sku = {{ type = "string" }} }} }}
"""


def add_flaky_tool(settings: Any, shop: Shop, cooldown: float = 60) -> None:
    with Path(settings.TOOLOPS_TOOLS_FILE).open("a") as f:
        f.write(FLAKY.format(url=shop.url, cooldown=cooldown))
    registry.reset()


def call(client: Any, run: str, step: int) -> dict[str, Any]:
    response = client.post(
        f"/api/v1/runs/{run}/calls",
        {"step_index": step, "tool": "flaky_stock", "args": {"sku": "A12"}},
        format="json",
    )
    assert response.status_code == 200, response.content
    return response.json()


@pytest.mark.django_db
def test_it_opens_after_consecutive_failures_and_stops_sending(
    api: APIClient, shop: Shop, settings: Any
) -> None:
    add_flaky_tool(settings, shop)
    shop.fault("/inventory/stock", fail_next=100, fail_status=503)
    api.post("/api/v1/runs", {"run_id": "r-b"}, format="json")

    for step in range(3):
        assert call(api, "r-b", step)["status"] == "failed"
    refused = call(api, "r-b", 3)

    assert refused["status"] == "failed"
    assert refused["error"]["reason"] == "circuit_open"
    assert refused["attempts"] == 0
    assert "unavailable" in refused["feedback"]
    assert len(shop.requests("/inventory/stock")) == 3  # the fourth was never sent
    listed = {t["name"]: t for t in api.get("/api/v1/tools").json()["tools"]}
    assert listed["flaky_stock"]["available"] is False
    assert listed["flaky_stock"]["available_at"]


@pytest.mark.django_db
def test_it_neither_counts_nor_resets_on_a_client_error(
    api: APIClient, shop: Shop, settings: Any
) -> None:
    add_flaky_tool(settings, shop)
    api.post("/api/v1/runs", {"run_id": "r-c"}, format="json")
    shop.fault("/inventory/stock", fail_next=2, fail_status=503)
    call(api, "r-c", 0)
    call(api, "r-c", 1)
    shop.fault("/inventory/stock", fail_next=1, fail_status=400)
    call(api, "r-c", 2)  # a 400 says the request was wrong, not that the tool is down

    assert CircuitBreaker.objects.get(tool="flaky_stock").consecutive_failures == 2
    shop.fault("/inventory/stock")
    assert call(api, "r-c", 3)["status"] == "succeeded"
    assert CircuitBreaker.objects.get(tool="flaky_stock").consecutive_failures == 0


@pytest.mark.django_db
def test_it_opens_on_the_failure_rate_of_the_window(
    api: APIClient, shop: Shop, settings: Any
) -> None:
    with Path(settings.TOOLOPS_TOOLS_FILE).open("a") as f:
        f.write(
            FLAKY.format(url=shop.url, cooldown=60)
            .replace("flaky_stock", "rate_stock")
            .replace(
                "consecutive_failures = 3, min_calls = 100",
                "consecutive_failures = 50, min_calls = 4, failure_rate = 0.5",
            )
        )
    registry.reset()
    api.post("/api/v1/runs", {"run_id": "r-r"}, format="json")
    outcomes = []
    for step, fail in enumerate([False, True, False, True]):
        shop.fault("/inventory/stock", **({"fail_next": 1, "fail_status": 502} if fail else {}))
        body = api.post(
            "/api/v1/runs/r-r/calls",
            {"step_index": step, "tool": "rate_stock", "args": {"sku": "A12"}},
            format="json",
        ).json()
        outcomes.append(body["status"])

    assert outcomes == ["succeeded", "failed", "succeeded", "failed"]
    assert CircuitBreaker.objects.get(tool="rate_stock").state == "open"


@pytest.mark.django_db
def test_it_can_be_forced_open_and_reset_by_an_operator(
    api: APIClient, shop: Shop, settings: Any
) -> None:
    add_flaky_tool(settings, shop)
    api.post("/api/v1/runs", {"run_id": "r-f"}, format="json")
    breaker.breaker_force_open(tool="flaky_stock", seconds=3600, reason="maintenance")
    assert call(api, "r-f", 0)["error"]["reason"] == "circuit_open"
    breaker.breaker_reset(tool="flaky_stock")
    assert call(api, "r-f", 1)["status"] == "succeeded"
    assert len(shop.requests("/inventory/stock")) == 1


def test_it_shares_state_between_processes_and_probes_once(
    toolops_server: Any, agent_a: Any, shop: Shop, settings: Any
) -> None:
    add_flaky_tool(settings, shop, cooldown=1)
    first, second = toolops_server(), toolops_server()
    headers = {"Authorization": f"Bearer {agent_a[1]}"}
    for server in (first, second):
        httpx.post(f"{server.url}/api/v1/runs", json={"run_id": "r-s"}, headers=headers)

    def post(server: Any, step: int) -> dict[str, Any]:
        return httpx.post(
            f"{server.url}/api/v1/runs/r-s/calls",
            json={"step_index": step, "tool": "flaky_stock", "args": {"sku": "A12"}},
            headers=headers,
            timeout=30,
        ).json()

    shop.fault("/inventory/stock", fail_next=3, fail_status=503)
    for step in range(3):
        assert post(first, step)["status"] == "failed"
    # The second web process never saw a failure, yet its calls are refused.
    refused = post(second, 10)
    assert refused["error"]["reason"] == "circuit_open"
    assert len(shop.requests("/inventory/stock")) == 3

    # After the cool-down (timed by the database's clock, as the breaker times it), N
    # concurrent calls through both processes: exactly one probe.
    wait_until(
        lambda: CircuitBreaker.objects.filter(tool="flaky_stock", open_until__lte=Now()).exists()
    )
    shop.fault("/inventory/stock", latency_ms=500)
    answers: list[dict[str, Any]] = []
    threads = [
        threading.Thread(target=lambda i=i: answers.append(post((first, second)[i % 2], 20 + i)))
        for i in range(8)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    assert len(shop.requests("/inventory/stock")) == 4  # three failures, one probe
    statuses = sorted(a["status"] for a in answers)
    assert statuses.count("succeeded") == 1
    assert all(a["error"]["reason"] == "circuit_open" for a in answers if a["status"] == "failed")
    assert CircuitBreaker.objects.get(tool="flaky_stock").state == "closed"


@pytest.mark.django_db
def test_it_lets_an_operators_hold_run_out(api: APIClient, shop: Shop, settings: Any) -> None:
    add_flaky_tool(settings, shop)
    api.post("/api/v1/runs", {"run_id": "r-h"}, format="json")
    breaker.breaker_force_open(tool="flaky_stock", seconds=60, reason="maintenance")
    assert call(api, "r-h", 0)["error"]["reason"] == "circuit_open"

    from datetime import timedelta

    from django.utils import timezone

    CircuitBreaker.objects.filter(tool="flaky_stock").update(
        open_until=timezone.now() - timedelta(seconds=5)
    )
    assert "flaky_stock" not in breaker.breaker_availability()
    assert call(api, "r-h", 1)["status"] == "succeeded"
    assert CircuitBreaker.objects.get(tool="flaky_stock").forced is False
