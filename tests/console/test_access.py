"""Who may open the console: login, logout, groups, the 403 for everyone else."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from toolops.permissions import (
    can_control_breakers,
    can_edit_policies,
    can_settle_unknown,
    can_view_console,
)

from .conftest import PASSWORD, logged_in, make_user

CONSOLE_PAGES = [
    "/console/",
    "/console/runs/1/",
    "/console/tools/",
    "/console/tools/x/policy/",
    "/console/unknown/",
    "/console/unknown/1/settle/",
    "/console/health/",
]


@pytest.mark.django_db
@pytest.mark.parametrize("url", CONSOLE_PAGES)
def test_it_redirects_anonymous_users_to_login(client: Client, url: str) -> None:
    response = client.get(url)

    assert response.status_code == 302
    assert response["Location"] == f"/console/login/?next={url}"


@pytest.mark.django_db
@pytest.mark.parametrize("url", CONSOLE_PAGES)
def test_it_forbids_a_user_in_no_group(outsider: Any, url: str) -> None:
    response = logged_in(outsider).get(url)

    assert response.status_code == 403
    assert b"not in a console group" in response.content


@pytest.mark.django_db
@pytest.mark.parametrize("group", ["reviewers", "support", "operators"])
def test_it_lets_each_console_group_in(django_user_model: Any, group: str) -> None:
    user = make_user(django_user_model, f"member-{group}", group)

    response = logged_in(user).get("/console/")

    assert response.status_code == 200
    assert f'class="badge role">{group}<' in response.content.decode()


@pytest.mark.django_db
def test_it_lets_a_superuser_in_without_a_group(superuser: Any) -> None:
    response = logged_in(superuser).get("/console/")

    assert response.status_code == 200
    assert 'class="badge role">superuser<' in response.content.decode()


@pytest.mark.django_db
def test_it_logs_in_through_the_form_and_lands_on_runs(client: Client, reviewer: Any) -> None:
    page = client.get("/console/login/")
    assert page.status_code == 200
    assert b'name="username"' in page.content

    response = client.post(
        "/console/login/", {"username": "rita", "password": PASSWORD, "next": "/console/tools/"}
    )

    assert response.status_code == 302
    assert response["Location"] == "/console/tools/"
    assert client.get("/console/").status_code == 200


@pytest.mark.django_db
def test_it_refuses_a_wrong_password(client: Client, reviewer: Any) -> None:
    response = client.post("/console/login/", {"username": "rita", "password": "nope"})

    assert response.status_code == 200
    assert b"did not match" in response.content
    assert client.get("/console/").status_code == 302


@pytest.mark.django_db
def test_it_logs_out_with_a_post_only(reviewer_client: Client) -> None:
    assert reviewer_client.get("/console/logout/").status_code == 405

    response = reviewer_client.post("/console/logout/")

    assert response.status_code == 302
    assert reviewer_client.get("/console/").status_code == 302


@pytest.mark.django_db
def test_it_shows_navigation_user_and_admin_link_for_staff_only(
    django_user_model: Any, reviewer_client: Client
) -> None:
    page = reviewer_client.get("/console/").content.decode()
    assert 'href="/console/"' in page
    assert 'href="/console/tools/"' in page
    assert ">rita<" in page
    assert 'href="/admin/"' not in page
    assert 'action="/console/logout/"' in page

    staff = make_user(django_user_model, "stella", "operators", is_staff=True)
    assert 'href="/admin/"' in logged_in(staff).get("/console/").content.decode()


@pytest.mark.django_db
def test_it_puts_csrf_in_body_hx_headers(reviewer_client: Client) -> None:
    page = reviewer_client.get("/console/").content.decode()

    assert '<body hx-headers=\'{"X-CSRFToken": "' in page
    assert "django_htmx/htmx-2.min.js" in page
    assert "https://" not in page  # no CDN: the console works offline


@pytest.mark.django_db
def test_it_answers_the_permission_helpers(
    operator: Any, reviewer: Any, support: Any, outsider: Any, superuser: Any
) -> None:
    assert [can_view_console(u) for u in (operator, reviewer, support, outsider, superuser)] == [
        True,
        True,
        True,
        False,
        True,
    ]
    assert [can_edit_policies(u) for u in (operator, reviewer, support, outsider, superuser)] == [
        True,
        False,
        False,
        False,
        True,
    ]
    for helper in (can_settle_unknown, can_control_breakers):
        assert [helper(u) for u in (operator, reviewer, support, outsider, superuser)] == [
            True,
            False,
            False,
            False,
            True,
        ]
    outsider.is_active = False
    superuser.is_active = False
    assert not can_view_console(superuser)
    assert not can_settle_unknown(superuser) and not can_control_breakers(superuser)


@pytest.mark.django_db
def test_a_page_of_another_role_says_which_group_it_needs_and_links_home(support: Any) -> None:
    response = logged_in(support).get("/console/approvals/")

    page = response.content.decode()
    assert response.status_code == 403
    assert "Only reviewers may see and decide approvals." in page
    assert 'in the group <strong class="your-groups">support</strong>' in page
    assert '<a class="button primary" href="/console/">Go to your home page</a>' in page


@pytest.mark.django_db
def test_a_user_in_no_group_is_not_sent_home_to_another_403(outsider: Any) -> None:
    page = logged_in(outsider).get("/console/").content.decode()

    assert "in no console group" in page and "Go to your home page" not in page
