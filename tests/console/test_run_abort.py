"""An operator aborts a run from its page ("Abort run", with a reason, audited); the page
shows the run's compensations and links each ticket."""

from __future__ import annotations

from typing import Any
from unittest.mock import patch

import pytest
from django.test import Client

from compensations.models import Compensation
from tests.compensations.conftest import dead_letter
from toolops.models import Agent, AuditEntry, Run

from .conftest import logged_in, make_call, make_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def run(agent_a: tuple[Agent, str]) -> Run:
    run = make_run(agent_a[0], "r-abort")
    reserve = make_call(
        run, "tc-1", 0, "reserve_stock", "succeeded", result={"reservation_id": "res-1"}
    )
    Compensation.objects.create(
        run=run, call=reserve, tool="release_stock", args={"reservation_id": "res-1"}, key="r" * 64
    )
    return run


def test_it_shows_compensations_and_the_abort_form_to_operators(
    operator_client: Client, run: Run
) -> None:
    page = operator_client.get(f"/console/runs/{run.pk}/").content.decode()

    assert "Compensations (1)" in page
    assert "<code>release_stock</code>" in page
    assert 'class="badge s-registered"' in page
    assert ">Abort run</button>" in page


def test_it_hides_the_abort_form_from_reviewers(reviewer_client: Client, run: Run) -> None:
    page = reviewer_client.get(f"/console/runs/{run.pk}/").content.decode()

    assert "Compensations (1)" in page
    assert "Abort run" not in page


def test_an_operator_aborts_with_a_reason_and_it_is_audited(
    operator: Any, run: Run, django_capture_on_commit_callbacks: Any
) -> None:
    with (
        patch("compensations.tasks.compensate_run.delay", autospec=True) as delay,
        django_capture_on_commit_callbacks(execute=True),
    ):
        response = logged_in(operator).post(
            f"/console/runs/{run.pk}/abort/",
            {"reason": "customer called to cancel", "confirm": "on"},
            follow=True,
        )

    assert "the worker is undoing its calls" in response.content.decode()
    run.refresh_from_db()
    assert (run.status, run.end_reason) == ("aborting", "customer called to cancel")
    assert Compensation.objects.get(run=run).status == "pending"
    delay.assert_called_once_with(run.pk)
    entry = AuditEntry.objects.get(action="run.abort", object_id=run.run_id)
    assert (entry.actor, entry.object_url) == (operator, f"/console/runs/{run.pk}/")
    assert "customer called to cancel" in entry.summary
    assert entry.detail == {
        "from": "running",
        "to": "aborting",
        "reason": "customer called to cancel",
    }


@pytest.mark.parametrize("reason", ["", "   ", "x" * 2001])
def test_it_refuses_an_abort_without_a_sane_reason(operator: Any, run: Run, reason: str) -> None:
    response = logged_in(operator).post(
        f"/console/runs/{run.pk}/abort/", {"reason": reason}, follow=True
    )

    assert "Not aborted" in response.content.decode()
    run.refresh_from_db()
    assert run.status == "running"
    assert not AuditEntry.objects.filter(action="run.abort").exists()


def test_it_refuses_an_abort_that_was_not_confirmed(operator: Any, run: Run) -> None:
    response = logged_in(operator).post(
        f"/console/runs/{run.pk}/abort/", {"reason": "customer called to cancel"}, follow=True
    )

    page = response.content.decode()
    assert "Not aborted: tick “I understand this cannot be taken back” to confirm" in page
    run.refresh_from_db()
    assert run.status == "running"
    assert not AuditEntry.objects.filter(action="run.abort").exists()


def test_the_abort_form_asks_for_its_confirmation(operator: Any, run: Run) -> None:
    page = logged_in(operator).get(f"/console/runs/{run.pk}/").content.decode()

    form = page.split('class="abort-form"')[1].split("</form>")[0]
    assert '<input type="checkbox" name="confirm" value="on" required>' in form
    assert 'data-confirm="Abort run r-abort?' in form


def test_it_refuses_to_abort_a_completed_run(operator: Any, run: Run) -> None:
    Run.objects.filter(pk=run.pk).update(status="completed")

    response = logged_in(operator).post(
        f"/console/runs/{run.pk}/abort/", {"reason": "too late", "confirm": "on"}, follow=True
    )

    assert "cannot be aborted" in response.content.decode()
    assert Run.objects.get(pk=run.pk).status == "completed"


@pytest.mark.parametrize("who", ["reviewer", "support"])
def test_only_operators_may_abort(request: Any, run: Run, who: str) -> None:
    user = request.getfixturevalue(who)

    response = logged_in(user).post(f"/console/runs/{run.pk}/abort/", {"reason": "no"})

    assert response.status_code == 403
    assert Run.objects.get(pk=run.pk).status == "running"


def test_it_links_a_ticket_for_support(support: Any, agent_a: Any) -> None:
    ticket = dead_letter(agent_a[0], "r-linked")

    page = logged_in(support).get(f"/console/runs/{ticket.run_id}/").content.decode()

    assert f'href="/console/tickets/{ticket.pk}/"' in page
    assert 'class="badge s-dead_lettered"' in page
