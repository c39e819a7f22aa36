"""A run's page stays live while the run can change: told of changes over Channels with
REDIS_URL set, polling without; the executor tells a run of each call it claims and
records, after commit."""

from __future__ import annotations

from datetime import timedelta
from html.parser import HTMLParser
from typing import Any
from unittest.mock import call as called
from unittest.mock import patch

import pytest
from django.contrib.auth.models import Permission
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from compensations.models import Compensation, Ticket
from tests.conftest import Shop
from tests.console.conftest import logged_in, make_call, make_run, make_user
from toolops.models import Agent, Approval, Run
from traces import live

pytestmark = pytest.mark.django_db


@pytest.fixture
def reviewer_client(django_user_model: Any, settings: Any) -> Client:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    return logged_in(make_user(django_user_model, "rita", "reviewers"))


@pytest.fixture
def run(agent_a: tuple[Agent, str]) -> Run:
    run = make_run(agent_a[0], "r-live")
    make_call(run, "tc-1", 0, "query_stock", "succeeded")
    return run


def test_without_redis_a_running_runs_page_polls(
    reviewer_client: Client, run: Run, settings: Any
) -> None:
    settings.REDIS_URL = ""

    page = reviewer_client.get(f"/console/runs/{run.pk}/?page=1").content.decode()

    assert f'hx-get="/console/runs/{run.pk}/?page=1" hx-trigger="every 3s"' in page
    assert 'data-live="poll"' in page
    assert "data-push" not in page


def test_with_redis_a_running_runs_page_is_told_of_changes(
    reviewer_client: Client, run: Run, settings: Any
) -> None:
    settings.REDIS_URL = "redis://127.0.0.1:1/0"  # only read as "set"; nothing connects

    page = reviewer_client.get(f"/console/runs/{run.pk}/").content.decode()

    assert f'data-push="/ws/runs/{run.pk}/"' in page
    assert 'hx-trigger="live-changed from:body"' in page
    assert 'data-live="push"' in page


def test_an_ended_runs_page_neither_polls_nor_listens(
    reviewer_client: Client, run: Run, settings: Any
) -> None:
    settings.REDIS_URL = "redis://127.0.0.1:1/0"
    Run.objects.filter(pk=run.pk).update(status="completed")

    page = reviewer_client.get(f"/console/runs/{run.pk}/").content.decode()

    assert "hx-trigger" not in page
    assert "data-push" not in page
    assert 'data-live="ended"' in page


def test_run_changed_pushes_after_commit_and_only_with_redis(
    settings: Any, django_capture_on_commit_callbacks: Any
) -> None:
    with patch("toolops.live._enqueue", autospec=True) as enqueue:
        settings.REDIS_URL = ""
        with django_capture_on_commit_callbacks(execute=True) as callbacks:
            live.run_changed(run_pk=7)
        assert callbacks == []

        settings.REDIS_URL = "redis://127.0.0.1:1/0"
        with django_capture_on_commit_callbacks(execute=False) as callbacks:
            live.run_changed(run_pk=7)
            enqueue.assert_not_called()  # not before the change commits
        callbacks[0]()

    enqueue.assert_called_once_with("run-7", 7)


def test_the_executor_tells_the_run_of_each_call_it_claims_and_records(
    api: APIClient, shop: Shop
) -> None:
    assert api.post("/api/v1/runs", {"run_id": "r-hooks"}, format="json").status_code == 201
    run = Run.objects.get(run_id="r-hooks")

    with patch("traces.services.run_changed", autospec=True) as run_changed:
        api.post(
            "/api/v1/runs/r-hooks/calls",
            {"step_index": 0, "tool": "query_stock", "args": {"sku": "A12"}},
            format="json",
        )
        assert run_changed.call_args_list == [called(run_pk=run.pk)]  # a read: recorded
        run_changed.reset_mock()
        api.post(
            "/api/v1/runs/r-hooks/calls",
            {"step_index": 1, "tool": "reserve_stock", "args": {"sku": "A12", "qty": 1}},
            format="json",
        )
        # A write: in flight once claimed, then recorded.
        assert run_changed.call_args_list == [called(run_pk=run.pk)] * 2
        run_changed.reset_mock()
        assert api.post("/api/v1/runs/r-hooks/complete").status_code == 200
        assert run_changed.call_args_list == [called(run_pk=run.pk)]


class RunBody(HTMLParser):
    """The links and forms inside #run-body, and whether it says the run can be aborted."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.depth = 0
        self.links: list[str] = []
        self.abortable: bool | None = None
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if self.depth == 0:
            if tag == "div" and found.get("id") == "run-body":
                self.depth = 1
                self.abortable = "data-abortable" in found
            return
        self.depth += tag == "div"
        self.links += [str(found[name]) for name in ("href", "action") if name in found]

    def handle_endtag(self, tag: str) -> None:
        if self.depth and tag == "div":
            self.depth -= 1


def test_a_refreshed_run_body_has_the_links_of_the_full_page(
    django_user_model: Any, agent_a: tuple[Agent, str], settings: Any
) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    # Every role at once, and the permission to read full args: every link the page has.
    everyone = make_user(django_user_model, "ada", "reviewers", "operators", "support")
    everyone.user_permissions.add(Permission.objects.get(codename="view_full_args"))
    now = timezone.now()
    run = make_run(agent_a[0], "r-links")
    reserve = make_call(run, "tc-1", 0, "reserve_stock", "succeeded")
    compensation = Compensation.objects.create(
        run=run, call=reserve, tool="release_stock", key="k" * 64, status="dead_lettered"
    )
    ticket = Ticket.objects.create(
        compensation=compensation, run=run, tool="release_stock", reason=Ticket.Reason.DEAD_LETTERED
    )
    lost = make_call(run, "tc-2", 1, "create_order", "unknown")
    approval = Approval.objects.create(
        run=run,
        tool="charge",
        reason="irreversible",
        args_hash="h",
        expires_at=now + timedelta(hours=1),
    )
    held = make_call(run, "tc-3", 2, "charge", "pending_approval", approval=approval)
    client = logged_in(everyone)
    url = f"/console/runs/{run.pk}/"

    full = RunBody(client.get(url).content.decode())
    refreshed = RunBody(client.get(url, HTTP_HX_REQUEST="true").content.decode())

    assert refreshed.links == full.links
    assert refreshed.abortable is full.abortable is True
    for link in (
        f"/console/approvals/{approval.approval_id}/",  # reviewers
        f"/console/unknown/{lost.pk}/settle/",  # operators
        f"/console/tickets/{ticket.pk}/",  # support
        f"/console/calls/{held.call_id}/args/",  # full args
    ):
        assert link in refreshed.links
    # The run ends: the refreshed body no longer offers to abort it (the form outside the
    # live region hides itself then).
    Run.objects.filter(pk=run.pk).update(status="completed")
    ended = RunBody(client.get(url, HTTP_HX_REQUEST="true").content.decode())
    assert ended.abortable is False
