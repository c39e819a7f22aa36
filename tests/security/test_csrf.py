"""Cross-site request forgery on every state-changing console route: a page on another
site makes a logged-in person's browser POST a console form. The browser sends the
session and CSRF cookies, but the forged form cannot carry the token, so Django's CSRF
middleware must refuse it (403) before the view runs, and nothing may change.

The routes are read from the URL configuration, not listed by hand: a new console route
fails `test_every_console_route_is_covered` until it is added to ROUTES, and one that
takes a POST fails `test_the_routes_that_take_a_post_are_the_ones_tested` until it is
tested here."""

# The console's personas are imported as fixtures, so test arguments shadow them.
# ruff: noqa: F811

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, reverse
from django.utils import timezone
from django_otp.plugins.otp_totp.models import TOTPDevice

from compensations.models import Ticket
from tests.console.test_two_factor import code_for
from tests.security.conftest import LOCKED, PASSWORD, World, snapshot
from toolops.accounts import twofactor
from toolops.forms import TOOK_EFFECT
from toolops.notify import hooks
from toolops.notify.models import NotificationDelivery, Webhook
from toolops.policy import versions
from toolops.policy.models import PolicyVersion
from toolops.views.policy_forms import normalised, signed_digest

pytestmark = pytest.mark.django_db

Kwargs = Callable[[World], dict[str, Any]]
Body = Callable[[World, Any], dict[str, Any]]


def _none(w: World) -> dict[str, Any]:
    return {}


def _run(w: World) -> dict[str, Any]:
    return {"pk": w.run.pk}


def _call(w: World) -> dict[str, Any]:
    return {"call_id": w.call.call_id}


def _approval(w: World) -> dict[str, Any]:
    return {"approval_id": w.approval.approval_id}


def _ticket(w: World) -> dict[str, Any]:
    return {"pk": w.ticket.pk}


def _snoozed_ticket(w: World) -> dict[str, Any]:
    """The ticket, snoozed (by its column alone, which no snapshot reads): un-snoozing it
    is then a change, and only a POST with its token makes it."""
    Ticket.objects.filter(pk=w.ticket.pk).update(snoozed_until=timezone.now() + timedelta(hours=1))
    return {"pk": w.ticket.pk}


# A console webhook where nothing listens (port 9): its test fails at once, audited.
DEAD_HOOK = "http://127.0.0.1:9/hooks"


def _webhook(w: World) -> Webhook:
    """A console webhook, stored as the console stores one but with no audit entry of its
    own: naming it in a request changes nothing the snapshot sees."""
    found = Webhook.objects.filter(group="operators").first()
    sealed = hooks.sealed(url=DEAD_HOOK, secret="s" * 32)
    return found or Webhook.objects.create(group="operators", shown=DEAD_HOOK, sealed=sealed)


DENY = 'default = "deny"\n'


def _policy(w: World) -> dict[str, Any]:
    """The agent policy's version in force (the world's)."""
    return {"number": versions.active_version().number}


def _proposal(w: World) -> dict[str, Any]:
    """The version another operator proposed, waiting for a confirmation (the world's;
    another when a test visiting every route confirmed that one on its way)."""
    proposal = PolicyVersion.objects.filter(state=PolicyVersion.State.PROPOSED).first()
    if proposal is None:
        proposal = versions.apply(DENY, note="again", actor_name="ops", propose=True)
    return {"number": proposal.number}


# Every console route: how to name its object. A route missing here fails the suite.
ROUTES: dict[str, Kwargs] = {
    "login": _none,
    "logout": _none,
    "runs": _none,
    "run-detail": _run,
    "call": _call,
    "tools": _none,
    "tool-policy": lambda w: {"name": w.tool},
    "unknown": _none,
    "unknown-settle": lambda w: {"pk": w.unknown.pk},
    "health": _none,
    "breaker-force-open": lambda w: {"name": w.breaker_tool},
    "breaker-reset": lambda w: {"name": w.breaker_tool},
    "metrics": _none,
    "run-abort": _run,
    "search": _none,
    "call_args": _call,
    "approvals": _none,
    "approval": _approval,
    "approval-decide": _approval,
    "tickets": _none,
    "tickets-bulk": _none,
    "ticket": _ticket,
    "ticket-assign": _ticket,
    "ticket-retry": _ticket,
    "ticket-resolve": _ticket,
    "ticket-comment": _ticket,
    "ticket-snooze": _ticket,
    "ticket-unsnooze": _snoozed_ticket,
    "audit": _none,
    "login-code": _none,
    "two-factor": _none,
    "lockouts": _none,
    "lockout-unlock": _none,
    "agents": _none,
    "agent-rate-limit": lambda w: {"pk": w.agent.pk},
    "account-notifications": _none,
    "notifications": _none,
    "notification-retry": lambda w: {"pk": NotificationDelivery.objects.get(status="failed").pk},
    "home": _none,
    "nav-counts": _none,
    "webhooks": _none,
    "webhook-add": _none,
    "webhook-test": _none,
    "webhook-remove": lambda w: {"pk": _webhook(w).pk},
    "policy": _none,
    "policy-version": _policy,
    "policy-validate": _none,
    "policy-simulate": _none,
    "policy-apply": _none,
    "policy-rollback": _policy,
    "policy-confirm": _proposal,
    "policy-withdraw": _proposal,
}

# The routes that take a POST, each with the body its own form would send: with the
# token it changes something (test_with_its_token_the_same_post_changes_something).
POSTS: dict[str, Body] = {
    "login": lambda w, user: {"username": user.username, "password": PASSWORD},
    "logout": lambda w, user: {},
    "tool-policy": lambda w, user: {"max_attempts": "2"},
    "unknown-settle": lambda w, user: {
        "outcome": TOOK_EFFECT,
        "note": "found it in the shop",
        "result": '{"order_id": "o-9"}',
    },
    "breaker-force-open": lambda w, user: {
        f"{w.breaker_tool}-minutes": "30",
        f"{w.breaker_tool}-reason": "forged",
        f"{w.breaker_tool}-confirm": "on",
    },
    "breaker-reset": lambda w, user: {},
    "run-abort": lambda w, user: {"reason": "forged abort", "confirm": "on"},
    "approval-decide": lambda w, user: {
        "decision": "approve",
        "note": "",
        "args_hash": w.approval.args_hash,
        "confirmed": "1",  # the confirmation's own field: a charge is confirmed
    },
    "tickets-bulk": lambda w, user: {"action": "assign", "ids": [str(w.ticket.pk)]},
    "ticket-assign": lambda w, user: {"to": "me"},
    "ticket-retry": lambda w, user: {},
    "ticket-resolve": lambda w, user: {"note": "forged resolve"},
    "ticket-comment": lambda w, user: {"text": "forged comment"},
    "ticket-snooze": lambda w, user: {"until": "1h"},
    "ticket-unsnooze": lambda w, user: {},
    "login-code": lambda w, user: {"code": _code(user, confirmed=True)},
    "two-factor": lambda w, user: {"code": _code(user, confirmed=False)},
    "lockout-unlock": lambda w, user: {"username": LOCKED[0], "ip_address": LOCKED[1]},
    "agent-rate-limit": lambda w, user: {"rate_limit_per_minute": "7"},
    "account-notifications": lambda w, user: {"email": "forged@example.com", "kinds": []},
    "notification-retry": lambda w, user: {},
    "webhook-add": lambda w, user: {
        "group": "operators",
        "url": "https://hooks.example/forged",
        "secret_choice": "make",
    },
    "webhook-test": lambda w, user: {"target": _webhook(w).target},
    "webhook-remove": lambda w, user: {},
    "policy-validate": lambda w, user: {"text": DENY},
    "policy-simulate": lambda w, user: {"text": DENY, "days": "7"},
    "policy-apply": lambda w, user: {
        "text": DENY,
        "note": "forged",
        "simulated": signed_digest(normalised(DENY)),
    },
    "policy-rollback": lambda w, user: {"note": "forged rollback"},
    "policy-confirm": lambda w, user: {},
    "policy-withdraw": lambda w, user: {},
}
# POSTs that change nothing by design (a draft checked or simulated, never stored): a
# forged one is still refused, but there is nothing for a token to change.
READS = {"policy-validate", "policy-simulate"}


def _code(user: Any, *, confirmed: bool) -> str:
    """The code the person's authenticator shows: from their device (a confirmed one at
    the login's second step, the one being enrolled on the two-factor page)."""
    if confirmed:
        device = TOTPDevice.objects.filter(user=user, confirmed=True).first()
        return code_for(device) if device is not None else "000000"
    return code_for(twofactor.device_for_enrolment(user=user))


LOGINS = ("login", "login-code")


def console_route_names() -> set[str]:
    """The names of every route under the console namespace, includes followed."""
    _, console = get_resolver().namespace_dict["console"]

    def walk(patterns: list[Any]) -> set[str]:
        names: set[str] = set()
        for entry in patterns:
            if isinstance(entry, URLResolver):
                names |= walk(entry.url_patterns)
            elif isinstance(entry, URLPattern) and entry.name:
                names.add(entry.name)
        return names

    return walk(console.url_patterns)


def url_of(name: str, world: World) -> str:
    return reverse(f"console:{name}", kwargs=ROUTES[name](world))


def browser_of(user: Any, name: str = "") -> Client:
    """A logged-in browser that holds the CSRF cookie, as a console user's does after
    opening any page: the forged request carries the cookie, never the token. For the
    login form, a browser not logged in (login CSRF: the attacker logs the victim into
    the attacker's account)."""
    client = Client(enforce_csrf_checks=True)
    if name == "login":
        assert client.get("/console/login/").status_code == 200
    elif name == "login-code":
        # The second step of a login: the password was right, the code is still to come.
        TOTPDevice.objects.create(user=user, name="console", confirmed=True)
        assert client.get("/console/login/").status_code == 200
        token = client.cookies["csrftoken"].value
        credentials = {"username": user.username, "password": PASSWORD}
        response = client.post("/console/login/", {**credentials, "csrfmiddlewaretoken": token})
        assert response.status_code == 302 and "code" in response["Location"]
    else:
        client.force_login(user)
        assert client.get("/console/").status_code == 200
    assert client.cookies.get("csrftoken") is not None
    return client


def test_every_console_route_is_covered() -> None:
    assert console_route_names() == set(ROUTES)


def test_the_routes_that_take_a_post_are_the_ones_tested(world: World, superuser: Any) -> None:
    # With the token (the test client's default) a route that takes no POST answers 405.
    client = Client()
    client.force_login(superuser)
    taking = set()
    for name in sorted(ROUTES):
        body = POSTS[name](world, superuser) if name in POSTS else {}
        response = client.post(url_of(name, world), body)
        if response.status_code != 405:
            taking.add(name)
        if name in ("login", "logout"):
            client.force_login(superuser)
    assert taking == set(POSTS)


@pytest.mark.parametrize("name", sorted(POSTS))
def test_a_forged_post_without_the_csrf_token_is_refused_and_changes_nothing(
    name: str, world: World, superuser: Any
) -> None:
    browser = browser_of(superuser, name)
    before = snapshot(browser)

    response = browser.post(url_of(name, world), POSTS[name](world, superuser))

    assert response.status_code == 403
    assert b"CSRF" in response.content
    assert snapshot(browser) == before
    # A forged logout logs nobody out; a forged login logs nobody in.
    assert browser.get("/console/").status_code == (302 if name in LOGINS else 200)


@pytest.mark.parametrize("name", sorted(POSTS))
def test_a_forged_post_with_a_wrong_csrf_token_is_refused(
    name: str, world: World, superuser: Any
) -> None:
    browser = browser_of(superuser, name)
    before = snapshot(browser)
    body = {**POSTS[name](world, superuser), "csrfmiddlewaretoken": "x" * 64}

    response = browser.post(url_of(name, world), body)

    assert response.status_code == 403
    assert snapshot(browser) == before


@pytest.mark.parametrize("name", sorted(set(POSTS) - READS))
def test_with_its_token_the_same_post_changes_something(
    name: str, world: World, superuser: Any
) -> None:
    # What makes "changes nothing" above mean something: the same body, sent with the
    # token as the console's own form sends it, does change what snapshot() looks at.
    browser = browser_of(superuser, name)
    before = snapshot(browser)
    token = browser.cookies["csrftoken"].value

    response = browser.post(
        url_of(name, world), {**POSTS[name](world, superuser), "csrfmiddlewaretoken": token}
    )

    assert response.status_code in (200, 302), response.content[:500]
    assert snapshot(browser) != before


def test_a_forged_post_to_the_admin_is_refused_too(world: World, superuser: Any) -> None:
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(superuser)
    assert browser.get("/admin/").status_code == 200
    page = f"/admin/toolops/agent/{world.agent.pk}/change/"

    response = browser.post(page, {"name": "hijacked", "rate_limit_per_minute": "1"})

    assert response.status_code == 403
    world.agent.refresh_from_db()
    assert (world.agent.name, world.agent.is_active) == ("agent-a", True)
