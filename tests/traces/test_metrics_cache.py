"""`/metrics` answers from each process's last scrape for TOOLOPS_METRICS_CACHE_S: the
whole-table aggregates run once per window, however many scrapes arrive; a fresh answer
after it; and the token is checked before any cached answer is given."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from tests.traces.conftest import Catalog
from tests.traces.metrics_scenario import samples
from tests.waiting import wait_until
from toolops.models import Agent, Run, ToolCall

pytestmark = pytest.mark.django_db
CALLS = ("toolops_tool_calls_total", (("status", "succeeded"), ("tool", "query_stock")))


def scrape(**headers: str) -> Any:
    return Client().get("/metrics", headers=headers)


def add_call(run: Run, number: int) -> None:
    ToolCall.objects.create(
        run=run,
        step_index=number,
        tool_call_id=f"tc-{number}",
        call_id=f"c-cache-{number}",
        tool="query_stock",
        status="succeeded",
        args_digest="x",
        finished_at=timezone.now(),
    )


@pytest.fixture
def run(agent_a: tuple[Agent, str], catalog: Catalog) -> Run:
    catalog()  # the demo catalog: query_stock is counted under its own name
    return Run.objects.create(agent=agent_a[0], run_id="r-cache", trace_id="a" * 32)


def test_two_scrapes_within_the_window_run_the_aggregates_once(
    settings: Any, run: Run, django_assert_num_queries: Any
) -> None:
    settings.TOOLOPS_METRICS_CACHE_S = 0
    add_call(run, 1)
    fresh = scrape()  # computed now, and kept
    settings.TOOLOPS_METRICS_CACHE_S = 60
    add_call(run, 2)

    with django_assert_num_queries(0):
        again = scrape()

    assert again.content == fresh.content
    assert samples(again.content.decode())[CALLS] == 1  # the answer of the window's start


def test_after_the_window_a_scrape_reads_the_tables_again(settings: Any, run: Run) -> None:
    settings.TOOLOPS_METRICS_CACHE_S = 0
    add_call(run, 1)
    assert samples(scrape().content.decode())[CALLS] == 1
    settings.TOOLOPS_METRICS_CACHE_S = 0.2
    add_call(run, 2)

    wait_until(
        lambda: samples(scrape().content.decode())[CALLS] == 2,
        10,
        failure="the cached answer outlived its window",
    )


def test_a_cached_answer_still_needs_the_token(settings: Any, run: Run) -> None:
    settings.TOOLOPS_METRICS_TOKEN = "scrape-token"
    settings.TOOLOPS_METRICS_CACHE_S = 60
    assert scrape(Authorization="Bearer scrape-token").status_code == 200

    refused = scrape()

    assert refused.status_code == 401
    assert b"toolops_" not in refused.content


def test_the_setting_refuses_a_window_that_is_not_a_number_of_seconds() -> None:
    import os
    import subprocess
    import sys

    from tests.toolops.test_settings import ROOT

    env = {**os.environ, "TOOLOPS_METRICS_CACHE_S": "-1"}
    result = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0
    assert "TOOLOPS_METRICS_CACHE_S must be 0 to 3600 seconds" in result.stderr
