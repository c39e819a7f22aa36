"""`/console/search/?q=ID` (API.md): one run found by any of its ids → its page, at the
call when the id names one of its calls; several → the results page. Business keys and
e-mails: test_search_keys.py."""

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

    response = reviewer_client.get("/console/search/", {"q": "r-same"})

    assert response.status_code == 200
    page = response.content.decode()
    assert "run_id r-same names 2 runs" in page
    assert page.count("<code>r-same</code>") == 2


def test_it_says_so_when_nothing_matches(reviewer_client: Client, run: Run) -> None:
    response = reviewer_client.get("/console/search/", {"q": "nope<script>"})

    page = response.content.decode()
    assert "Nothing found for <code>nope&lt;script&gt;</code>" in page
    assert "nope<script>" not in page


def test_an_empty_query_goes_to_the_runs_list_and_says_what_to_type(
    reviewer_client: Client,
) -> None:
    response = reviewer_client.get("/console/search/", {"q": " "})

    assert response["Location"] == "/console/runs/"
    page = reviewer_client.get(response["Location"]).content.decode()
    assert "Type a run id, an order id or an e-mail to search." in page


def test_it_needs_a_console_user(client: Client, run: Run) -> None:
    response = client.get("/console/search/", {"q": "r-7"})

    assert response.status_code == 302
    assert response["Location"].startswith("/console/login/")


DEMO_RUN = "demo-20261202-000556-c9f8-3-charge-review"


@pytest.mark.parametrize("q", ["charge-review", "c9f8", "000556-c9f8"])
def test_a_part_of_a_run_id_finds_the_run(reviewer_client: Client, agent_a: Any, q: str) -> None:
    run = make_run(agent_a[0], DEMO_RUN)
    make_run(agent_a[0], "demo-20261202-000601-a1b2-4-refund-fails")

    response = reviewer_client.get("/console/search/", {"q": q})

    assert response["Location"] == f"/console/runs/{run.pk}/"


def test_runs_whose_id_starts_with_it_come_before_those_that_contain_it(
    reviewer_client: Client, agent_a: Any
) -> None:
    make_run(agent_a[0], "x-order-1")
    make_run(agent_a[0], "order-2")

    page = reviewer_client.get("/console/search/", {"q": "order"}).content.decode()

    assert page.index("order-2") < page.index("x-order-1")
    assert "run_id starts with it" in page and "run_id contains it" in page


def test_an_exact_id_ranks_before_a_part_of_a_run_id(
    reviewer_client: Client, agent_a: Any, agent_b: Any
) -> None:
    make_run(agent_a[0], "r-long-name")
    make_run(agent_b[0], "r-long")
    other = make_run(agent_a[0], "r-other")
    make_call(other, "r-long", 0, "query_stock", "succeeded")  # a tool_call_id too

    page = reviewer_client.get("/console/search/", {"q": "r-long"}).content.decode()

    exact = page.index("run_id r-long")
    assert exact < page.index("tool_call_id r-long") < page.index("Run ids with r-long in them")
    assert page.index("<code>r-long</code>") < page.index("<code>r-long-name</code>")


def test_a_wildcard_in_the_query_is_taken_literally(reviewer_client: Client, run: Run) -> None:
    page = reviewer_client.get("/console/search/", {"q": "r_%"}).content.decode()

    assert "Nothing found for" in page


def test_a_tool_call_id_every_run_has_is_one_line_with_the_latest_runs(
    reviewer_client: Client, agent_a: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("traces.console.search.LIMIT", 3)
    for n in range(5):
        make_call(make_run(agent_a[0], f"r-{n}"), "tc-1", 0, "query_stock", "succeeded")

    response = reviewer_client.get("/console/search/", {"q": "tc-1"})

    assert response.status_code == 200  # not a redirect to one of them
    page = response.content.decode()
    assert "tool_call_id tc-1 appears in 5 runs, the most recent:" in page
    assert [n for n in range(5) if f"<code>r-{n}</code>" in page] == [2, 3, 4]
    assert "and 2 more runs" in page


@pytest.mark.parametrize(
    ("q", "problem"),
    [
        ("x" * 300, "The search is 300 characters long; an id or an e-mail is at most 256."),
        ("r-7\tr-8", "The search holds an invisible character"),
        ("r-7\x00", "The search holds an invisible character"),
    ],
)
def test_a_query_that_cannot_be_searched_for_says_why(
    reviewer_client: Client, run: Run, q: str, problem: str
) -> None:
    response = reviewer_client.get("/console/search/", {"q": q})

    assert response.status_code == 400
    assert problem in response.content.decode()


def test_a_short_query_says_parts_of_run_ids_need_three_characters(
    reviewer_client: Client, run: Run
) -> None:
    page = reviewer_client.get("/console/search/", {"q": "r-"}).content.decode()

    assert "Type at least 3 characters to find runs by a part of their id." in page
