"""The console's home, /console/: what needs the person now, by role, each a link to where
it is worked; "Nothing needs you now" and the last few things when all is well; a live
region that refreshes itself; a bounded number of queries; and the runs list moved to
/console/runs/ under its old name."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.contrib.staticfiles import finders
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from tests.toolops.approvals.test_console import hold
from toolops.models import Agent

from .conftest import logged_in, make_run, make_user
from .home_scene import (
    BREAKER_WHY,
    NOTIFY_ERROR,
    everything,
    failed_notification,
    open_breaker,
)

pytestmark = pytest.mark.django_db


def home(client: Client, **extra: Any) -> str:
    response = client.get("/console/", **extra)
    assert response.status_code == 200
    return response.content.decode()


def section(page: str, name: str) -> str:
    """The signal's card, or "" when the page has none."""
    found = re.search(rf'<section class="card signal signal-{name}".*?</section>', page, re.S)
    return found[0] if found else ""


@pytest.fixture
def agent(agent_a: tuple[Agent, str], console_catalog: Any) -> Agent:
    return agent_a[0]


@pytest.fixture
def all_three(django_user_model: Any) -> Any:
    return make_user(django_user_model, "pat", "reviewers", "support", "operators")


def test_it_shows_a_person_in_every_group_each_signal_linked_to_where_it_is_worked(
    agent: Agent, all_three: Any
) -> None:
    scene = everything(agent)

    page = home(logged_in(all_three))

    breakers = section(page, "breakers")
    assert 'href="/console/health/"' in breakers and "1 tool switched off" in breakers
    assert "<code>flaky_warehouse</code>" in breakers and BREAKER_WHY in breakers
    assert "(3 min ago)" in breakers and "(in 3 min)" in breakers  # since, and until
    tickets = section(page, "tickets")
    assert 'href="/console/tickets/">1 ticket open</a>' in tickets
    assert f'href="/console/tickets/{scene.ticket.pk}/">#{scene.ticket.pk}</a>' in tickets
    assert "1</strong> with nobody on it" in tickets
    approvals = section(page, "approvals")
    assert 'href="/console/approvals/">1 approval waiting</a>' in approvals
    assert f'href="/console/approvals/{scene.approval.approval_id}/"' in approvals
    assert "(15 min ago)" in approvals and "waiting over 10 min" in approvals
    unknown = section(page, "unknown")
    assert 'href="/console/unknown/">1 unknown outcome waiting</a>' in unknown
    assert "(7 min ago)" in unknown
    notifications = section(page, "notifications")
    assert 'href="/console/notifications/?status=failed">1 notification failed</a>' in (
        notifications
    )
    assert NOTIFY_ERROR in notifications and "the operators group's webhook" in notifications
    # Times are absolute too (local time by console.js, UTC in the title).
    assert page.count('<time datetime="') >= 6
    assert "Nothing needs you now" not in page


def test_an_operator_sees_the_other_queues_back_up_without_links_that_would_403(
    agent: Agent, operator: Any
) -> None:
    scene = everything(agent)

    page = home(logged_in(operator))

    tickets = section(page, "tickets")
    assert '1 ticket open <span class="muted small">(support\'s desk)</span>' in tickets
    assert "href=" not in tickets
    approvals = section(page, "approvals")
    assert "1 approval waiting" in approvals and "href=" not in approvals
    assert f"<code>{scene.approval.approval_id}</code>" in approvals
    for name in ("breakers", "unknown", "notifications"):
        assert section(page, name), name


def test_an_operator_is_not_told_of_an_approval_that_has_only_just_come(
    agent: Agent, operator: Any, reviewer: Any
) -> None:
    hold(make_run(agent, "r-new"), "tc-new", age_s=60)

    assert section(home(logged_in(operator)), "approvals") == ""
    # A reviewer decides every one: theirs is on their home at once.
    assert "1 approval waiting" in section(home(logged_in(reviewer)), "approvals")


def test_an_approval_about_to_end_is_one_the_operator_hears_of(agent: Agent, operator: Any) -> None:
    hold(make_run(agent, "r-ending"), "tc-ending", age_s=60, ttl_s=210)

    approvals = section(home(logged_in(operator)), "approvals")

    assert "ending within 5 min" in approvals and "(in 2 min)" in approvals


@pytest.mark.parametrize(
    ("who", "shown", "not_shown"),
    [
        ("reviewer", {"approvals"}, {"tickets", "breakers", "unknown", "notifications"}),
        ("support", {"tickets"}, {"approvals", "breakers", "unknown", "notifications"}),
    ],
)
def test_reviewers_and_support_get_a_home_of_their_own_work(
    agent: Agent, who: str, shown: set[str], not_shown: set[str], request: Any
) -> None:
    everything(agent)

    page = home(logged_in(request.getfixturevalue(who)))

    assert {name for name in shown if section(page, name)} == shown
    assert {name for name in not_shown if section(page, name)} == set()


def test_with_nothing_to_do_it_says_so_and_shows_the_last_few_things(
    agent: Agent, operator: Any, django_user_model: Any
) -> None:
    for n in range(7):
        make_run(agent, f"r-{n}", created_at=timezone.now() - timedelta(minutes=10 - n))
    open_breaker()
    logged_in(operator).post("/console/health/flaky_warehouse/reset/")  # an audited action

    page = home(logged_in(operator))

    assert "Nothing needs you now." in page
    assert 'class="card signal' not in page
    listed = re.findall(r'href="/console/runs/\d+/"><code>(r-\d)</code>', page)
    assert listed == ["r-6", "r-5", "r-4", "r-3", "r-2"]  # the newest five
    assert "(4 min ago)" in page
    assert "<strong>olga</strong>" in page and 'href="/console/audit/"' in page


def test_a_reviewer_with_nothing_to_do_is_told_so_without_the_audit_log(reviewer: Any) -> None:
    page = home(logged_in(reviewer))

    assert "Nothing needs you now." in page and "No run yet." in page
    assert 'href="/console/audit/"' not in page


def test_it_refreshes_itself_as_a_live_region(agent: Agent, operator: Any) -> None:
    client = logged_in(operator)
    page = home(client)
    assert '<div id="home-live" hx-get="/console/" hx-swap="outerHTML"' in page
    assert 'hx-trigger="every 10s"' in page

    open_breaker()
    region = home(client, HTTP_HX_REQUEST="true")

    assert region.lstrip().startswith('<div id="home-live"')
    assert "<html" not in region and "1 tool switched off" in region


def test_it_reads_a_bounded_number_of_queries_whatever_waits(
    agent: Agent, all_three: Any, django_assert_max_num_queries: Any
) -> None:
    everything(agent)
    for n in range(30):
        hold(make_run(agent, f"r-many-{n}"), f"tc-many-{n}", age_s=20 * 60)
    client = logged_in(all_three)
    home(client)

    # session, user, groups, the nav's three counts, per signal a count and a few rows, and
    # the agent policy's version in force (whose limits say who is near one).
    with django_assert_max_num_queries(16):
        page = home(client)
    assert page.count('href="/console/approvals/ap-') == 5  # the oldest few, not all 31


@pytest.mark.parametrize("path", ["/console/", "/console/nav/counts/"])
def test_it_keeps_out_anyone_in_no_console_group(outsider: Any, client: Client, path: str) -> None:
    assert logged_in(outsider).get(path).status_code == 403
    assert client.get(path)["Location"] == f"/console/login/?next={path}"


def test_the_menu_links_home_the_runs_and_for_operators_the_outbox(
    operator: Any, reviewer: Any
) -> None:
    page = home(logged_in(operator))
    assert '<a class="brand" href="/console/">ToolOps</a>' in page
    assert '<a href="/console/" aria-current="page">Home</a>' in page
    assert '<a href="/console/runs/">Runs</a>' in page
    assert '<a href="/console/notifications/">Notifications</a>' in page

    assert 'href="/console/notifications/"' not in home(logged_in(reviewer))


def test_the_runs_list_lives_at_console_runs_under_its_old_name(
    agent: Agent, reviewer: Any
) -> None:
    make_run(agent, "r-listed")

    assert reverse("console:runs") == "/console/runs/"
    page = logged_in(reviewer).get("/console/runs/").content.decode()
    assert "<h1>Runs</h1>" in page and "r-listed" in page
    assert '<a href="/console/runs/" aria-current="page">Runs</a>' in page


def test_every_page_links_the_favicon_and_it_is_served(reviewer: Any) -> None:
    page = home(logged_in(reviewer))

    assert '<link rel="icon" href="/static/console/favicon.svg" type="image/svg+xml">' in page
    found = finders.find("console/favicon.svg")
    assert found and Path(found).read_text().startswith("<svg")


def test_what_a_downstream_or_agent_wrote_is_shown_only_as_text(
    agent: Agent, operator: Any
) -> None:
    markup = '<script>alert(1)</script>"><img src=x onerror=alert(1)>'
    breaker = open_breaker()
    breaker.reason = f"{markup}reason"
    breaker.save(update_fields=["reason"])
    delivery = failed_notification()
    delivery.last_error = f"{markup}error"
    delivery.save(update_fields=["last_error"])

    page = home(logged_in(operator))

    assert "<script>alert(1)" not in page and '"><img' not in page
    assert (
        "&lt;script&gt;alert(1)&lt;/script&gt;&quot;&gt;&lt;img src=x onerror=alert(1)&gt;reason"
        in (page)
    )
    assert "&lt;/script&gt;&quot;&gt;&lt;img src=x onerror=alert(1)&gt;error" in page


def test_the_menu_counts_come_as_out_of_band_swaps_of_their_namesakes(
    agent: Agent, reviewer: Any, support: Any
) -> None:
    hold(make_run(agent, "r-held"), "tc-held")
    page = home(logged_in(reviewer))
    assert '<nav aria-label="Console" id="console-nav" data-counts="/console/nav/counts/">' in page
    assert '<span id="nav-approvals-count"><span class="badge count approvals-count"' in page

    counts = logged_in(reviewer).get("/console/nav/counts/")

    said = counts.content.decode()
    assert "no-cache" in counts["Cache-Control"]
    assert '<span id="nav-approvals-count" hx-swap-oob="true"><span class="badge count' in said
    assert 'title="1 approval waiting">1</span>' in said
    assert '<span id="nav-unknown-count" hx-swap-oob="true"></span>' in said
    assert "nav-tickets-count" not in said  # not in a reviewer's menu
    assert (
        "nav-approvals-count" not in logged_in(support).get("/console/nav/counts/").content.decode()
    )
