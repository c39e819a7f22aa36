"""`/console/search/?q=ID` (API.md): one run found by any of its ids → its page, at the
call when the id names one of its calls."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from toolops.models import Agent, Run

from .conftest import make_call, make_run

pytestmark = pytest.mark.django_db

KEY = "ab" * 32


@pytest.fixture
def run(agent_a: tuple[Agent, str]) -> Run:
    run = make_run(agent_a[0], "r-7", trace_id="4bf92f3577b34da6a3ce929d0e0e4736")
    make_call(run, "tc-77", 0, "create_order", "succeeded", call_id="c-abc", idempotency_key=KEY)
    make_run(agent_a[0], "r-70")  # starts like r-7: an exact match still wins
    return run


@pytest.mark.parametrize("q", ["r-7", "4bf92f3577b34da6a3ce929d0e0e4736"])
def test_it_redirects_to_the_one_run_an_id_names(reviewer_client: Client, run: Run, q: str) -> None:
    response = reviewer_client.get("/console/search/", {"q": f"  {q} "})

    assert response.status_code == 302
    assert response["Location"] == f"/console/runs/{run.pk}/"


@pytest.mark.parametrize("q", ["tc-77", "c-abc", KEY])
def test_a_calls_id_lands_at_the_call_on_its_runs_page(
    reviewer_client: Client, run: Run, q: str
) -> None:
    response = reviewer_client.get("/console/search/", {"q": q})

    assert response.status_code == 302
    assert response["Location"] == f"/console/runs/{run.pk}/#call-c-abc"


def test_it_lists_the_runs_when_several_match(
    reviewer_client: Client, agent_a: Any, agent_b: Any
) -> None:
    make_run(agent_a[0], "r-same")
    make_run(agent_b[0], "r-same")  # run ids are unique per agent only

    response = reviewer_client.get("/console/search/", {"q": "r-same"}, follow=True)

    assert response.redirect_chain[-1][0] == "/console/?q=r-same"
    assert response.content.decode().count("<code>r-same</code>") >= 2


def test_it_says_so_when_nothing_matches(reviewer_client: Client, run: Run) -> None:
    response = reviewer_client.get("/console/search/", {"q": "nope<script>"}, follow=True)

    page = response.content.decode()
    assert "No run has the id" in page
    assert "nope<script>" not in page


def test_an_empty_query_goes_to_the_runs_list(reviewer_client: Client) -> None:
    response = reviewer_client.get("/console/search/", {"q": " "})

    assert response["Location"] == "/console/"


def test_it_needs_a_console_user(client: Client, run: Run) -> None:
    response = client.get("/console/search/", {"q": "r-7"})

    assert response.status_code == 302
    assert response["Location"].startswith("/console/login/")
