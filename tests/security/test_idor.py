"""Insecure direct object references: naming an object that is not yours.

API: agent B names agent A's run and call, by the ids A uses. Every such request is a
404 (not a 403: B does not learn the object exists), and changes nothing.

Console: every route is tried by every persona who may not use it (a user in no console
group, a reviewer on the support desk, support on approvals, anyone but a holder of
view_full_args on a call's full args): 403, and nothing changed. The routes come from
test_csrf.ROUTES, which fails when the URL configuration has a route it does not name."""

# The console's personas are imported as fixtures, so test arguments shadow them.
# ruff: noqa: F811

from __future__ import annotations

from typing import Any

import pytest
from django.urls import get_resolver
from rest_framework.test import APIClient

from tests.conftest import Shop
from tests.security.conftest import World, logged_in, snapshot
from tests.security.test_csrf import POSTS, ROUTES, url_of
from tests.toolops.api.helpers import body, create_run, post_call
from toolops.models import Agent, Run, ToolCall

pytestmark = pytest.mark.django_db

RESERVE = {"sku": "A12", "qty": 1}

# -- the API --------------------------------------------------------------------------------


@pytest.fixture
def api_b(agent_b: tuple[Agent, str]) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {agent_b[1]}")
    return client


@pytest.fixture
def a_call(api: APIClient, shop: Shop) -> dict[str, Any]:
    """Agent A's run r-1 with one reserve_stock call."""
    create_run(api)
    done = body(post_call(api, step_index=0, tool="reserve_stock", args=RESERVE))
    assert done["status"] == "succeeded"
    return done


def a_state() -> list[Any]:
    return [
        list(Run.objects.order_by("pk").values_list("pk", "status", "end_reason")),
        list(ToolCall.objects.order_by("pk").values_list("pk", "status")),
    ]


# The API's routes and how each is tried by agent B on agent A's objects; routes that
# name no object of an agent's are listed with None.
API_TRIES: dict[str, Any] = {
    "run-create": None,
    "tool-list": None,
    "schema": None,
    "run-detail": ("GET", "/api/v1/runs/r-1", None),
    "run-complete": ("POST", "/api/v1/runs/r-1/complete", {}),
    "run-abort": ("POST", "/api/v1/runs/r-1/abort", {"reason": "mine now"}),
    "call-create": (
        "POST",
        "/api/v1/runs/r-1/calls",
        {"step_index": 1, "tool": "reserve_stock", "args": RESERVE},
    ),
    "call-detail": ("GET", "/api/v1/calls/{call_id}", None),
    # The agent's own view of the policy: no object in its path to name.
    "policy-detail": None,
}


def test_every_api_route_is_tried() -> None:
    names = {p.name for p in get_resolver("toolops.api.urls").url_patterns}
    assert names == set(API_TRIES)


@pytest.mark.parametrize("name", sorted(n for n, t in API_TRIES.items() if t is not None))
def test_agent_b_naming_agent_as_object_gets_404_and_changes_nothing(
    name: str, a_call: dict[str, Any], api_b: APIClient, shop: Shop
) -> None:
    method, path, data = API_TRIES[name]
    before, sent = a_state(), len(shop.requests())

    url = path.format(call_id=a_call["call_id"])
    response = api_b.get(url) if method == "GET" else api_b.post(url, data, format="json")

    assert response.status_code == 404, response.content
    assert a_call["call_id"] not in response.content.decode()
    assert a_state() == before and len(shop.requests()) == sent


def test_agent_b_long_polling_agent_as_call_gets_404_at_once(
    a_call: dict[str, Any], api_b: APIClient
) -> None:
    assert api_b.get(f"/api/v1/calls/{a_call['call_id']}", {"wait": 30}).status_code == 404


def test_agent_b_using_agent_as_run_id_gets_a_run_of_its_own(
    a_call: dict[str, Any], api_b: APIClient, agent_a: tuple[Agent, str]
) -> None:
    mine = create_run(api_b, "r-1")

    assert mine["status"] == "running"
    runs = Run.objects.filter(run_id="r-1")
    assert runs.count() == 2
    assert runs.get(agent=agent_a[0]).calls.count() == 1  # A's run is untouched


def test_agent_b_cannot_see_agent_as_calls_in_a_run_listing(
    a_call: dict[str, Any], api_b: APIClient
) -> None:
    create_run(api_b, "r-1")

    assert body(api_b.get("/api/v1/runs/r-1"))["calls"] == []


# -- the console ------------------------------------------------------------------------------

ANYONE = {"reviewer", "support", "operator"}
# Who may use each console route (superusers may use all; login and logout are everyone's).
ALLOWED: dict[str, set[str]] = {
    "runs": ANYONE,
    "run-detail": ANYONE,
    "call": ANYONE,
    "tools": ANYONE,
    "unknown": ANYONE,
    "health": ANYONE,
    "metrics": ANYONE,
    "search": ANYONE,
    "tool-policy": {"operator"},
    "unknown-settle": {"operator"},
    "breaker-force-open": {"operator"},
    "breaker-reset": {"operator"},
    "run-abort": {"operator"},
    "approvals": {"reviewer"},
    "approval": {"reviewer"},
    "approval-decide": {"reviewer"},
    "tickets": {"support"},
    "tickets-bulk": {"support"},
    "ticket": {"support"},
    "ticket-assign": {"support"},
    "ticket-retry": {"support"},
    "ticket-resolve": {"support"},
    "ticket-comment": {"support"},
    "ticket-snooze": {"support"},
    "ticket-unsnooze": {"support"},
    "call_args": set(),  # view_full_args: no persona has it
    "audit": {"operator"},
    "lockouts": {"operator"},
    "lockout-unlock": {"operator"},
    "agents": {"operator"},
    "agent-rate-limit": {"operator"},
    "two-factor": ANYONE,
    "account-notifications": ANYONE,
    "notifications": {"operator"},
    "notification-retry": {"operator"},
    "home": ANYONE,
    "nav-counts": ANYONE,
    "webhooks": {"operator"},
    "webhook-add": {"operator"},
    "webhook-test": {"operator"},
    "webhook-remove": {"operator"},
    # The agent policy: a version's page is linked from approvals, so every console
    # person reads it; the page and every change are the operators'.
    "policy": {"operator"},
    "policy-version": {"reviewer", "support", "operator"},
    "policy-validate": {"operator"},
    "policy-simulate": {"operator"},
    "policy-apply": {"operator"},
    "policy-rollback": {"operator"},
    "policy-confirm": {"operator"},
    "policy-withdraw": {"operator"},
}
PERSONAS = ("outsider", "reviewer", "support", "operator")
REFUSED = sorted(
    (name, persona)
    for name, allowed in ALLOWED.items()
    for persona in PERSONAS
    if persona not in allowed
)


def test_every_console_route_has_its_people() -> None:
    assert set(ALLOWED) == set(ROUTES) - {"login", "logout", "login-code"}


@pytest.mark.parametrize(("name", "persona"), REFUSED)
def test_a_console_user_without_the_role_is_refused_every_object_and_form(
    name: str, persona: str, world: World, request: Any
) -> None:
    user = request.getfixturevalue(persona)
    client = logged_in(user)
    before = snapshot()

    if name in POSTS:
        response = client.post(url_of(name, world), POSTS[name](world, user))
    else:
        response = client.get(url_of(name, world), {"q": world.run.run_id})

    assert response.status_code == 403
    assert snapshot() == before


def test_a_reviewer_sees_no_full_args_of_a_call(world: World, reviewer: Any) -> None:
    page = logged_in(reviewer).get(f"/console/calls/{world.call.call_id}/args/")

    assert page.status_code == 403
    assert "199.00" not in page.content.decode()


@pytest.mark.parametrize(
    "path",
    [
        "/console/runs/987654/",
        "/console/calls/c-nope/",
        "/console/calls/c-nope/args/",
        "/console/approvals/ap-nope/",
        "/console/tickets/987654/",
        "/console/unknown/987654/settle/",
        "/console/tools/no_such_tool/policy/",
    ],
)
def test_an_object_that_does_not_exist_is_404_even_for_a_superuser(
    path: str, world: World, superuser: Any
) -> None:
    assert logged_in(superuser).get(path).status_code == 404
