"""One breaker state on every page: Tool health, Metrics and /metrics read it from one
function (executor.breaker_states), as the next call would see it — an open breaker past
its cool-down is half-open everywhere ("the next call is a probe"), not "open" on one
page and "half-open" on another."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from toolops import executor
from toolops.models import CircuitBreaker

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fresh_scrapes(settings: Any) -> None:
    settings.TOOLOPS_METRICS_CACHE_S = 0  # each scrape reads the tables now


def health_cell(client: Client, tool: str) -> str:
    page = client.get("/console/health/").content.decode()
    row = page.split(f'id="health-{tool}"')[1].split("</tr>")[0]
    cell = row.split('class="nowrap breaker-state">')[1].split("</td>")[0]
    return " ".join(re.sub(r"<[^>]+>", " ", cell).split())


def metrics_tile(client: Client, tool: str) -> str:
    page = client.get("/console/metrics/", {"tool": tool}).content.decode()
    block = page.split('data-figure="breaker">')[1].split('<div class="sparks">')[0]
    return " ".join(re.sub(r"<[^>]+>", " ", block).split())


def gauge(client: Client, tool: str) -> str:
    text = client.get("/metrics").content.decode()
    return re.search(rf'^toolops_breaker_state{{tool="{tool}"}} (\S+)$', text, re.M)[1]  # type: ignore[index]


def test_a_breaker_past_its_cooldown_is_half_open_on_every_page(
    operator_client: Client, console_catalog: Any
) -> None:
    CircuitBreaker.objects.create(
        tool="flaky_warehouse",
        state="open",
        consecutive_failures=3,
        reason="3 in a row",
        opened_at=timezone.now() - timedelta(minutes=2),
        open_until=timezone.now() - timedelta(seconds=30),
    )

    assert health_cell(operator_client, "flaky_warehouse") == ("half-open the next call is a probe")
    assert metrics_tile(operator_client, "flaky_warehouse").startswith(
        "Breaker half-open the next call is a probe;"
    )
    assert gauge(operator_client, "flaky_warehouse") == "1.0"
    assert executor.breaker_states()["flaky_warehouse"].label == (
        "half-open — the next call is a probe"
    )


def test_a_cooling_breaker_is_open_until_the_same_time_on_every_page(
    operator_client: Client, console_catalog: Any
) -> None:
    until = timezone.now() + timedelta(minutes=3)
    CircuitBreaker.objects.create(
        tool="flaky_warehouse", state="open", open_until=until, reason="3 in a row"
    )

    health = health_cell(operator_client, "flaky_warehouse")
    tile = metrics_tile(operator_client, "flaky_warehouse")

    assert health == f"open cooling down until {until:%H:%M:%S}"
    assert tile.startswith(f"Breaker open cooling down until {until:%H:%M} UTC;")
    assert gauge(operator_client, "flaky_warehouse") == "2.0"


def test_an_operators_hold_that_ran_out_is_closed_on_every_page(
    operator_client: Client, console_catalog: Any
) -> None:
    CircuitBreaker.objects.create(
        tool="create_order",
        state="open",
        forced=True,
        open_until=timezone.now() - timedelta(seconds=1),
    )

    assert health_cell(operator_client, "create_order") == "closed"
    assert metrics_tile(operator_client, "create_order").startswith("Breaker closed ")
    assert gauge(operator_client, "create_order") == "0.0"
