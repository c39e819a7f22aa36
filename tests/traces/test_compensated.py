"""A long run's compensations on its page (traces/console/compensated.py): only those of
the calls the page shows, with the run's totals by status and links to the pages that
list the others — in the page and in its live refresh alike."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client

from compensations.models import Compensation
from tests.console.conftest import logged_in, make_call
from tests.console.conftest import make_user as make_console_user
from toolops.models import Agent, ToolCall
from traces.console.compensated import PageRange, _ranges

from .test_timeline import at, make_long_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def reviewer_client(django_user_model: Any, settings: Any) -> Client:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    return logged_in(make_console_user(django_user_model, "rita", "reviewers"))


ROW = re.compile(r'<tr id="comp-\d+">\s*<td><code>\w+</code></td>\s*<td><a href="([^"]+)"')


def comp_rows(html: str) -> list[str]:
    """The compensations listed: each one's link to the call it undoes."""
    return ROW.findall(html)


def pages(first: int, last: int) -> str:
    """The links to pages `first` to `last` that list the others."""
    link = '<a href="?page={0}#compensations">{0}</a>'
    return f"{link.format(first)}–{link.format(last)}."


def test_a_long_run_lists_the_compensations_of_the_calls_on_the_page(
    reviewer_client: Client, agent_a: tuple[Agent, str]
) -> None:
    run = make_long_run(agent_a[0], 1000, stop_at=650, compensations=650)
    Compensation.objects.filter(call__step_index__lt=20).update(status="succeeded")
    url = f"/console/runs/{run.pk}/"

    page = reviewer_client.get(url)  # page 7, where it stopped: calls 600–699
    refresh = reviewer_client.get(url, HTTP_HX_REQUEST="true")

    for html in (page.content.decode(), refresh.content.decode()):
        links = comp_rows(html)
        # Newest first: the 50 of this page's calls that registered one, and no others.
        assert links == [f"#call-c-long-1000-{i}" for i in range(649, 599, -1)]
        assert "Compensations (650)" in html
        assert '<span class="badge s-registered">630 registered</span>' in html
        assert '<span class="badge s-succeeded">20 succeeded</span>' in html
        assert "Those of other calls are listed with them, on pages" in html
        assert pages(1, 6) in html
    assert len(page.context["compensations"].rows) == 50

    beyond = reviewer_client.get(url, {"page": "9"}).content.decode()
    assert comp_rows(beyond) == []
    assert "None of the calls on this page has one." in beyond
    assert pages(1, 7) in beyond


def test_an_undo_call_on_the_page_brings_its_compensation(
    reviewer_client: Client, agent_a: tuple[Agent, str]
) -> None:
    run = make_long_run(agent_a[0], 150, compensations=1)
    run.status = "aborted"
    run.save(update_fields=["status"])
    undone = ToolCall.objects.get(call_id="c-long-150-0")
    undo = make_call(
        run,
        f"~undo:{undone.call_id}:1",
        0,
        "release_stock",
        "succeeded",
        role="undo",
        created_at=at(200),
    )
    Compensation.objects.filter(call=undone).update(undo_call=undo, status="succeeded", rounds=1)

    last = reviewer_client.get(f"/console/runs/{run.pk}/", {"page": "2"}).content.decode()
    first = reviewer_client.get(f"/console/runs/{run.pk}/", {"page": "1"}).content.decode()

    # On the undo call's page, linking back to the call it undoes on page 1.
    assert comp_rows(last) == ["?page=1#call-c-long-150-0"]
    assert f'<a href="#call-{undo.call_id}"><code>{undo.tool_call_id}</code></a>' in last
    # And on the call's own page.
    assert comp_rows(first) == ["#call-c-long-150-0"]
    assert "Those of other calls" not in first
    assert "listed with them, on page\n" in last


def test_page_numbers_are_joined_into_ranges() -> None:
    assert _ranges([]) == []
    assert _ranges([1, 2, 3, 5, 7, 8]) == [PageRange(1, 3), PageRange(5, 5), PageRange(7, 8)]


def test_an_aborted_runs_summary_says_so_and_what_was_undone(
    reviewer_client: Client, agent_a: tuple[Agent, str]
) -> None:
    run = make_long_run(agent_a[0], 3, compensations=3)
    Compensation.objects.filter(call__step_index=0).update(status="succeeded")
    Compensation.objects.filter(call__step_index=1).update(
        status="dead_lettered", last_error="HTTP 503: injected_fault"
    )
    run.status = "compensation_failed"
    run.save(update_fields=["status"])

    page = reviewer_client.get(f"/console/runs/{run.pk}/").content.decode()

    # The page's own plain sentence (traces/console/plain.py; test_story.py has them all):
    # what was done, then what was undone and what was not — never "All … succeeded".
    story = re.search(r'<p class="story">(.*?)</p>', page, re.S)
    assert story is not None
    assert story[1] == (
        "Aborted by the agent after 3 calls, all done: reserve_stock ×3. "
        "ToolOps undid 1 of 3 (release_stock); it has still to undo the rest (release_stock); "
        "release_stock failed."
    )
    assert "succeeded" not in story[1]
    # Its compensations' errors in words, the stored text on hover.
    assert 'title="HTTP 503: injected_fault">the ' in page
    assert "service answered 503 (unavailable)</td>" in page
