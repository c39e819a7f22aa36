"""Two real web processes (uvicorn) on one database answer `/metrics` and the Metrics page
with the same totals, whichever of them served the calls."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from django.contrib.auth.models import Group
from django.test import Client

from tests.conftest import Shop
from tests.traces.metrics_scenario import EXPECTED, amplification, hit_rate, run_scenario, samples
from toolops.models import Agent

TOKEN = "scrape-token-for-the-test"


@pytest.mark.django_db(transaction=True)
def test_two_web_processes_report_the_same_totals(
    toolops_server: Any, shop: Shop, agent_a: tuple[Agent, str], django_user_model: Any
) -> None:
    one = toolops_server(TOOLOPS_METRICS_TOKEN=TOKEN)
    two = toolops_server(TOOLOPS_METRICS_TOKEN=TOKEN)
    agent = httpx.Client(
        base_url=one.url, headers={"Authorization": f"Bearer {agent_a[1]}"}, timeout=30
    )

    def post(path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        response = agent.post(path, json=body)
        return response.status_code, response.json()

    # Every call goes through the first process only.
    run_scenario(post, shop)

    scraper = {"Authorization": f"Bearer {TOKEN}"}
    scrapes = [httpx.get(f"{s.url}/metrics", headers=scraper, timeout=30) for s in (one, two)]
    assert [r.status_code for r in scrapes] == [200, 200]
    first, second = (samples(r.text) for r in scrapes)
    assert first == second
    for key, value in EXPECTED.items():
        assert second[key] == value, key
    assert amplification(second, "query_stock") == 5 / 3
    assert hit_rate(second, "query_stock") == 2 / 5
    # The token, as each process read it from its environment.
    assert httpx.get(f"{two.url}/metrics", timeout=30).status_code == 401

    # The page, from either process, for a person logged in once.
    user = django_user_model.objects.create_user(username="olga", password=None)
    user.groups.add(Group.objects.get_or_create(name="operators")[0])
    browser = Client()
    browser.force_login(user)
    cookies = {"sessionid": browser.cookies["sessionid"].value}
    for server in (one, two):
        page = httpx.get(
            f"{server.url}/console/metrics/",
            params={"tool": "query_stock"},
            cookies=cookies,
            timeout=30,
        )
        assert page.status_code == 200
        assert "5 requests / 3 calls" in page.text
        assert "1.67×" in page.text
        assert "2 replays / 5 requests" in page.text
        assert "40.0%" in page.text
