"""The run page's plain summary (traces/console/plain.py, story.py): one or two sentences,
first on the page, in each state a run can be in — what its calls did, by the catalog's
titles, and for an aborted run what ToolOps undid and what it could not. An aborted run
never reads "All … succeeded" (the page once said "Aborted after 3 of 3 … All 3 of 3
tool calls succeeded"), while the API's summary keeps its contract."""

from __future__ import annotations

import html
import re
from typing import Any

import pytest
from django.db import transaction
from django.test import Client

from compensations.models import Ticket
from tests.console.conftest import logged_in, make_call, make_run, make_user
from toolops.audit.services import Action, audit_record
from toolops.models import Agent, Run, ToolCall
from traces.console.plain import Step, Undo, run_story

from .purchase import (
    BOUGHT,
    CANCEL,
    CHARGE,
    ORDER,
    REFUND,
    RELEASE,
    RESERVE,
    STEPS,
    at,
    demo_catalog,  # noqa: F401 - a fixture
    purchase,
    undo,
)

pytestmark = pytest.mark.django_db
ABORTED = f"Aborted by the agent after 3 calls, all done: {BOUGHT}."
NEVER = re.compile(r"\bAll\b.*\bsucceeded\b", re.I)


@pytest.fixture
def client(django_user_model: Any, settings: Any) -> Client:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    return logged_in(make_user(django_user_model, "sam", "support"))


def story(client: Client, run: Run) -> str:
    page = client.get(f"/console/runs/{run.pk}/").content.decode()
    found = re.search(r'<p class="story">(.*?)</p>', page, re.S)
    assert found is not None, "the page has no plain summary"
    # It comes first: before the facts, where the run stopped and the calls.
    assert page.index('<p class="story">') < page.index('<dl class="facts">')
    return html.unescape(found[1])


@pytest.mark.usefixtures("demo_catalog")
def test_a_completed_run_says_what_its_calls_did(
    client: Client, agent_a: tuple[Agent, str]
) -> None:
    run, calls = purchase(agent_a[0], "r-done", "completed")
    for call in calls:
        undo(call, "discarded")

    assert story(client, run) == f"Completed after 3 calls, all done: {BOUGHT}."


@pytest.mark.usefixtures("demo_catalog")
def test_a_running_run_says_what_it_waits_for(client: Client, agent_a: tuple[Agent, str]) -> None:
    run, calls = purchase(agent_a[0], "r-running", "running")
    ToolCall.objects.filter(pk=calls[2].pk).update(status="pending_approval", finished_at=None)

    assert story(client, run) == (
        f"Running: 3 calls so far, 2 done ({RESERVE}; {ORDER}); {CHARGE} is waiting for approval."
    )


@pytest.mark.usefixtures("demo_catalog")
def test_a_run_with_a_failed_and_a_skipped_call_says_why_in_words(
    client: Client, agent_a: tuple[Agent, str]
) -> None:
    run = make_run(agent_a[0], "r-partial", status="completed")
    make_call(run, "tc-1", 0, "query_stock", "succeeded", args={"sku": "A12"})
    make_call(
        run,
        "tc-2",
        1,
        "charge",
        "failed",
        args=STEPS[2][1],
        error_class="retry",
        error_reason="downstream_error",
        error_message="HTTP 503: injected_fault",
    )
    make_call(
        run,
        "tc-3",
        2,
        "send_notification",
        "skipped",
        args={"to": "cus_42", "message": "hi"},
        error_class="fatal",
        error_reason="dependency_failed",
        error_message="depends on tc-2, which failed",
    )

    told = story(client, run)

    assert told == (
        "Completed after 3 calls, 1 done (query_stock); "
        f"{CHARGE} failed — the payments service answered 503 (unavailable); "
        "Send a message to cus_42 was skipped — a call it depends on did not succeed."
    )
    # The API's summary keeps its contract, under the page's Technical details.
    page = client.get(f"/console/runs/{run.pk}/").content.decode()
    assert "Based on partial data: 1 of 3 tool calls succeeded;" in page


@pytest.mark.usefixtures("demo_catalog")
def test_an_aborted_run_says_what_toolops_undid(client: Client, agent_a: tuple[Agent, str]) -> None:
    run, calls = purchase(agent_a[0], "r-undone", "aborted", end_reason="customer left")
    for call in calls:
        undo(call, "succeeded", rounds=("succeeded",))

    told = story(client, run)

    assert told == f"{ABORTED} ToolOps undid all 3 ({REFUND}; {CANCEL}; {RELEASE})."
    assert not NEVER.search(told)


@pytest.mark.usefixtures("demo_catalog")
def test_an_undo_that_failed_names_its_ticket(client: Client, agent_a: tuple[Agent, str]) -> None:
    run, (reserve, order, charge) = purchase(agent_a[0], "r-failed", "compensation_failed")
    undo(reserve, "succeeded", rounds=("succeeded",))
    undo(order, "succeeded", rounds=("succeeded",))
    undo(charge, "dead_lettered", rounds=("failed",), ticket="open")
    ticket = Ticket.objects.get()

    told = story(client, run)

    assert told == (
        f"{ABORTED} ToolOps undid 2 of 3 ({CANCEL}; {RELEASE}); "
        f"{REFUND} failed — support ticket #{ticket.pk}."
    )
    assert not NEVER.search(told)


@pytest.mark.usefixtures("demo_catalog")
def test_an_undo_support_retried_and_one_settled_by_hand_say_so(
    client: Client, agent_a: tuple[Agent, str]
) -> None:
    run, (reserve, order, charge) = purchase(agent_a[0], "r-retried", "aborted")
    undo(reserve, "resolved", rounds=("failed",), ticket="closed")
    undo(order, "succeeded", rounds=("succeeded",))
    undo(charge, "succeeded", rounds=("failed", "succeeded"), ticket="closed")
    settled, retried = Ticket.objects.order_by("pk")

    assert story(client, run) == (
        f"{ABORTED} ToolOps undid 2 of 3 ({REFUND}, after support ticket #{retried.pk}; {CANCEL}); "
        f"{RELEASE} was settled by hand (support ticket #{settled.pk})."
    )


@pytest.mark.usefixtures("demo_catalog")
def test_a_run_being_aborted_says_what_is_still_being_undone(
    client: Client, agent_a: tuple[Agent, str]
) -> None:
    run, (reserve, order, charge) = purchase(agent_a[0], "r-aborting", "aborting")
    undo(reserve, "pending")
    undo(order, "running")
    undo(charge, "succeeded", rounds=("succeeded",))

    assert story(client, run) == (
        f"{ABORTED} ToolOps undid 1 of 3 ({REFUND}); it is undoing the rest ({CANCEL}; {RELEASE})."
    )


@pytest.mark.usefixtures("demo_catalog")
def test_an_operator_abort_names_the_operator(
    client: Client, agent_a: tuple[Agent, str], django_user_model: Any
) -> None:
    run, _ = purchase(agent_a[0], "r-olga", "aborted")
    olga = make_user(django_user_model, "olga", "operators")
    with transaction.atomic():
        audit_record(actor=olga, action=Action.RUN_ABORT, obj=run, summary="Aborted")

    assert story(client, run).startswith(f"Aborted by olga after 3 calls, all done: {BOUGHT}. ")


@pytest.mark.usefixtures("demo_catalog")
def test_a_run_out_of_budget_says_which_and_what_an_abort_would_undo(
    client: Client, agent_a: tuple[Agent, str]
) -> None:
    run, (reserve, order, charge) = purchase(
        agent_a[0], "r-spent", "budget_exhausted", max_attempts=3, attempts_used=3
    )
    ToolCall.objects.filter(pk=charge.pk).update(
        status="failed",
        error_class="fatal",
        error_reason="budget_exhausted",
        attempts=0,
        error_message="the run's attempt budget is used up",
    )
    undo(reserve, "registered")
    undo(order, "registered")

    assert story(client, run) == (
        f"Stopped: the run used up its attempts budget after 3 calls, 2 done ({RESERVE}; {ORDER}); "
        f"{CHARGE} failed — the run's budget ran out. "
        f"If the run is aborted, ToolOps undoes {CANCEL}; {RELEASE}."
    )


def test_runs_without_calls_say_so(client: Client, agent_a: tuple[Agent, str]) -> None:
    assert story(client, make_run(agent_a[0], "r-new")) == "Running: no call yet."
    aborted = make_run(agent_a[0], "r-gone", status="aborted", ended_at=at(1))
    assert story(client, aborted) == "Aborted by the agent before any call. Nothing needed undoing."


def test_a_long_list_is_cut_and_repeated_titles_are_counted() -> None:
    steps = [Step(f"Reserve {i} × A12", "succeeded") for i in range(1, 7)]
    steps += [Step("query_stock", "succeeded")] * 3
    steps += [Step(f"Call {i}", "failed", "failed — no answer") for i in range(5)]

    told = run_story(status="completed", steps=steps, undos=[])

    assert told == (
        "Completed after 14 calls, 9 done (Reserve 1 × A12; Reserve 2 × A12; Reserve 3 × A12; "
        "Reserve 4 × A12 and 5 more); Call 0 failed — no answer; Call 1 failed — no answer; "
        "Call 2 failed — no answer; and 2 more did not succeed."
    )


@pytest.mark.parametrize("status", ["aborting", "aborted", "compensation_failed"])
def test_an_aborted_run_never_says_all_succeeded(status: str) -> None:
    steps = [Step("Reserve 1 × A12", "succeeded"), Step("Charge 9.00 EUR", "succeeded")]
    cases = [
        [],
        [Undo("Refund", "succeeded"), Undo("Release", "succeeded")],
        [Undo("Refund", "dead_lettered", 4), Undo("Release", "pending")],
    ]
    for undos in cases:
        told = run_story(status=status, steps=steps, undos=undos)
        assert told.startswith("Aborted by the agent after 2 calls, both done: ")
        assert not NEVER.search(told), told
