"""Unknown outcomes: the list, settling one by hand (audited, once), who may, bad input."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from toolops.executor import feedback
from toolops.models import Agent, AuditEntry, Run, ToolCall

from .conftest import logged_in, make_attempt, make_call, make_run

pytestmark = pytest.mark.django_db

SETTLED = AuditEntry.objects.filter(action="call.settle")
NOTE = "Found order o-77 in the shop admin under the client reference."


@pytest.fixture
def run(agent_a: tuple[Agent, str]) -> Run:
    return make_run(agent_a[0], "r-unk")


def make_unknown(
    run: Run, tool_call_id: str, tool: str = "create_order", **fields: Any
) -> ToolCall:
    fields.setdefault("error_class", "unknown")
    fields.setdefault("error_reason", "timeout")
    fields.setdefault("error_message", "orders service timed out after 2 attempts")
    fields.setdefault("feedback", f"{tool} timed out and its outcome is unknown. Do not retry.")
    fields.setdefault("step_index", 0)
    return make_call(run, tool_call_id, fields.pop("step_index"), tool, "unknown", **fields)


@pytest.fixture
def unknown(run: Run, console_catalog: Any) -> ToolCall:
    """create_order tc-lost, unknown for 10 minutes, the worker's next look in 5 minutes."""
    now = timezone.now()
    return make_unknown(
        run,
        "tc-lost",
        created_at=now - timedelta(minutes=10),
        reconcile_attempts=3,
        next_reconcile_at=now + timedelta(minutes=5),
        client_reference="ref-77",
    )


def settle_url(call: ToolCall) -> str:
    return f"/console/unknown/{call.pk}/settle/"


def fields_of(call: ToolCall) -> tuple[Any, ...]:
    call.refresh_from_db()
    return (
        call.status,
        call.settled_by_id,
        call.settle_note,
        call.feedback,
        call.result,
        call.error_class,
        call.error_message,
        call.next_reconcile_at,
    )


# -- the list ------------------------------------------------------------------------------


def test_it_lists_unknown_calls_oldest_first_with_what_a_person_needs(
    reviewer_client: Client, run: Run, unknown: ToolCall, agent_b: tuple[Agent, str]
) -> None:
    now = timezone.now()
    other = make_run(agent_b[0], "r-other")
    needs_person = make_unknown(
        other,
        "tc-notify",
        "send_notification",
        created_at=now - timedelta(hours=2),
        error_reason="downstream_error",
        error_message="502 Bad Gateway",
        reconcile_attempts=0,
    )
    make_unknown(
        run,
        "tc-newest",
        step_index=3,
        created_at=now - timedelta(seconds=30),
        next_reconcile_at=now - timedelta(seconds=1),
    )
    make_call(run, "tc-done", 1, "create_order", "succeeded")
    make_call(run, "tc-failed", 2, "create_order", "failed", error_reason="timeout")

    response = reviewer_client.get("/console/unknown/")

    assert response.status_code == 200
    rows = response.context["rows"]
    assert [r.call.tool_call_id for r in rows] == ["tc-notify", "tc-lost", "tc-newest"]
    assert [r.query_tool for r in rows] == [None, "query_order", "query_order"]
    page = response.content.decode()
    row = page.split(f'id="unknown-{needs_person.pk}"')[1].split("</tr>")[0]
    link = f'href="/console/calls/{needs_person.call_id}/"'
    for text in (
        "send_notification",
        "tc-notify",
        link,
        "r-other",
        "agent-b",
        "2 h",
        "downstream_error",
        "502 Bad Gateway",
        "needs a person",
        "no query tool",
    ):
        assert text in row, text
    lost = page.split(f'id="unknown-{unknown.pk}"')[1].split("</tr>")[0]
    for text in (
        "agent-a",
        "10 min",
        "timeout",
        "orders service timed out",
        'title="3 of 20 worker looks found no answer">0<',
        "in 4 min",
        "<code>query_order</code>",
    ):
        assert text in lost, text
    assert "due now" in page  # tc-newest's look is due: the worker has it
    assert "tc-done" not in page and "tc-failed" not in page
    # Reviewers read; only operators settle.
    assert "Settle…" not in page
    assert "3 calls unknown" in page


def test_it_shows_the_count_in_the_navigation(reviewer_client: Client, unknown: ToolCall) -> None:
    page = reviewer_client.get("/console/").content.decode()

    assert 'href="/console/unknown/"' in page
    assert 'href="/console/health/"' in page
    assert '<span class="badge count" title="1 call with an unknown outcome">1</span>' in page


def test_it_shows_no_badge_and_an_empty_list_when_nothing_is_unknown(
    reviewer_client: Client, console_catalog: Any
) -> None:
    response = reviewer_client.get("/console/unknown/")

    assert 'class="badge count"' not in response.content.decode()
    assert b"No unknown outcomes" in response.content


def test_it_shows_operators_a_settle_link(operator_client: Client, unknown: ToolCall) -> None:
    page = operator_client.get("/console/unknown/").content.decode()

    assert f'<a class="button" href="{settle_url(unknown)}">Settle…</a>' in page


def test_it_says_when_a_tool_left_the_catalog(
    reviewer_client: Client, run: Run, console_catalog: Any
) -> None:
    make_unknown(run, "tc-gone", "retired_tool")

    response = reviewer_client.get("/console/unknown/")

    (row,) = response.context["rows"]
    assert (row.query_tool, row.in_catalog) == (None, False)
    assert b"not in the catalog" in response.content


# session, user, the user's groups, the three nav counts (unknown outcomes, open tickets,
# pending approvals), the calls with their runs and agents.
UNKNOWN_LIST_QUERIES = 7


@pytest.mark.parametrize("count", [1, 30])
def test_it_lists_in_a_constant_number_of_queries(
    reviewer_client: Client,
    console_catalog: Any,
    django_assert_num_queries: Any,
    count: int,
    agent_a: tuple[Agent, str],
) -> None:
    for i in range(count):
        make_unknown(make_run(agent_a[0], f"r-{i}"), f"tc-{i}")

    with django_assert_num_queries(UNKNOWN_LIST_QUERIES):
        response = reviewer_client.get("/console/unknown/")

    assert len(response.context["rows"]) == count


# -- settling ------------------------------------------------------------------------------


def test_it_shows_the_settle_form_with_the_calls_facts(
    operator_client: Client, unknown: ToolCall
) -> None:
    make_attempt(unknown, 1, outcome="unknown", downstream_request_id="req-o-1")
    make_attempt(
        unknown, 2, purpose="reconcile", outcome="unknown", downstream_request_id="req-q-1"
    )

    response = operator_client.get(settle_url(unknown))

    assert response.status_code == 200
    page = response.content.decode()
    for text in (
        "tc-lost",
        "r-unk",
        "agent-a",
        "ref-77",
        "req-o-1",
        "<code>req-q-1</code> (reconcile)",
        "<code>query_order</code>",
        'name="note"',
        'name="result"',
        'value="took_effect"',
        'value="no_effect"',
        "Did take effect",
        "Did not take effect",
    ):
        assert text in page, text


def test_the_reconcile_count_agrees_with_the_looks_recorded(
    operator_client: Client, unknown: ToolCall
) -> None:
    # Two looks recorded (the timeline lists both), none of them counted by the worker's
    # backoff: the page once said "0 of 20" beside them.
    ToolCall.objects.filter(pk=unknown.pk).update(reconcile_attempts=0)
    make_attempt(unknown, 1, outcome="unknown", downstream_request_id="req-o-1")
    for number in (2, 3):
        make_attempt(
            unknown,
            number,
            purpose="reconcile",
            outcome="unknown",
            downstream_request_id=f"req-q-{number}",
        )

    settle = operator_client.get(settle_url(unknown)).content.decode()
    listed = operator_client.get("/console/unknown/").content.decode()

    assert "<dt>reconcile looks</dt><dd>2 recorded; the worker keeps looking" in settle
    assert "0 of 20" not in settle.split("<dt>reconcile looks</dt>")[1].split("recorded")[0]
    row = listed.split(f'id="unknown-{unknown.pk}"')[1].split("</tr>")[0]
    assert 'title="0 of 20 worker looks found no answer">2<' in row


def test_it_settles_a_call_that_did_take_effect_and_audits_it(
    operator: Any, operator_client: Client, unknown: ToolCall
) -> None:
    response = operator_client.post(
        settle_url(unknown),
        {"outcome": "took_effect", "note": f"  {NOTE}  ", "result": '{"order_id": "o-77"}'},
    )

    assert response.status_code == 302
    assert response["Location"] == "/console/unknown/"
    unknown.refresh_from_db()
    assert unknown.status == "succeeded"
    assert unknown.settled_by == operator
    assert unknown.settle_note == NOTE
    assert unknown.result == {"order_id": "o-77"}
    assert unknown.feedback == feedback.settled("create_order", succeeded=True)
    assert (unknown.error_class, unknown.error_reason, unknown.error_message) == ("", "", "")
    assert unknown.next_reconcile_at is None and unknown.finished_at is not None
    entry = SETTLED.get()
    assert (entry.actor, entry.actor_username, entry.object_id) == (
        operator,
        "olga",
        unknown.call_id,
    )
    assert (entry.object_type, entry.object_url) == ("call", f"/console/calls/{unknown.call_id}/")
    assert entry.detail["succeeded"] is True and entry.detail["with_result"] is True
    assert entry.summary == (
        f"Settled the unknown outcome by hand: did take effect (with a result). Note: {NOTE}"
    )
    # Back on the list: the message, and the call is gone from it.
    page = operator_client.get("/console/unknown/")
    assert "Settled create_order (tc-lost): did take effect." in page.content.decode()
    assert page.context["rows"] == []


def test_it_settles_a_call_that_did_not_take_effect(
    operator: Any, operator_client: Client, unknown: ToolCall
) -> None:
    response = operator_client.post(
        settle_url(unknown), {"outcome": "no_effect", "note": "No order under ref-77."}
    )

    assert response.status_code == 302
    unknown.refresh_from_db()
    assert (unknown.status, unknown.error_class) == ("failed", "fatal")
    assert unknown.error_message == "settled as failed by a person: No order under ref-77."
    assert unknown.feedback == feedback.settled("create_order", succeeded=False)
    assert unknown.result is None
    assert (unknown.settled_by, unknown.settle_note) == (operator, "No order under ref-77.")
    assert SETTLED.get().summary == (
        "Settled the unknown outcome by hand: did not take effect. Note: No order under ref-77."
    )


def test_it_settles_as_took_effect_without_a_result(
    operator_client: Client, unknown: ToolCall
) -> None:
    operator_client.post(settle_url(unknown), {"outcome": "took_effect", "note": NOTE})

    unknown.refresh_from_db()
    assert (unknown.status, unknown.result) == ("succeeded", None)
    assert "(with a result)" not in SETTLED.get().summary


def test_it_says_already_settled_and_overwrites_nothing(
    operator: Any, operator_client: Client, superuser: Any, unknown: ToolCall
) -> None:
    first = operator_client.post(settle_url(unknown), {"outcome": "no_effect", "note": "first"})
    assert first.status_code == 302
    before = fields_of(unknown)

    # A second person, on the form they opened before the first one settled it.
    response = logged_in(superuser).post(
        settle_url(unknown),
        {"outcome": "took_effect", "note": "second", "result": '{"order_id": "o-1"}'},
        follow=True,
    )

    assert response.status_code == 200
    assert response.redirect_chain == [("/console/unknown/", 302)]
    assert (
        "create_order (tc-lost) was already settled (by someone else or by the worker); "
        "nothing was changed."
    ) in response.content.decode()
    assert fields_of(unknown) == before
    assert unknown.settled_by == operator and unknown.settle_note == "first"
    assert SETTLED.count() == 1  # the first settlement only


def test_it_says_already_settled_when_the_worker_got_there_first(
    operator_client: Client, unknown: ToolCall
) -> None:
    # The worker's query found the order between the page load and the submit.
    ToolCall.objects.filter(pk=unknown.pk).update(
        status="succeeded",
        result={"order_id": "o-w"},
        feedback="found by query_order",
        next_reconcile_at=None,
    )
    before = fields_of(unknown)

    response = operator_client.post(
        settle_url(unknown), {"outcome": "no_effect", "note": "nothing there"}, follow=True
    )

    assert b"was already settled" in response.content
    assert fields_of(unknown) == before
    assert unknown.settled_by is None
    assert not SETTLED.exists()


def test_it_shows_a_settled_call_without_a_form(
    operator: Any, operator_client: Client, unknown: ToolCall
) -> None:
    operator_client.post(settle_url(unknown), {"outcome": "no_effect", "note": "not there"})

    page = operator_client.get(settle_url(unknown)).content.decode()

    assert "This call is no longer unknown" in page
    assert "settled by olga: “not there”" in page
    assert 'name="note"' not in page


@pytest.mark.parametrize(
    ("data", "field", "message"),
    [
        ({"outcome": "took_effect", "note": ""}, "note", "This field is required."),
        ({"outcome": "took_effect", "note": "   \n "}, "note", "This field is required."),
        ({"outcome": "took_effect", "note": "x" * 2001}, "note", "at most 2000 characters"),
        ({"note": NOTE}, "outcome", "This field is required."),
        ({"outcome": "maybe", "note": NOTE}, "outcome", "Select a valid choice."),
        (
            {"outcome": "took_effect", "note": NOTE, "result": "{order_id: 1"},
            "result",
            "Enter valid JSON: Expecting property name enclosed in double quotes",
        ),
        (
            {"outcome": "took_effect", "note": NOTE, "result": "{'a': 1}"},
            "result",
            "Enter valid JSON",
        ),
        (
            {"outcome": "no_effect", "note": NOTE, "result": '{"order_id": "o-1"}'},
            "result",
            "A result goes only with “did take effect”.",
        ),
        (
            {"outcome": "took_effect", "note": NOTE, "result": '{"id": 1}'},
            "result",
            "does not match create_order’s result schema: &#x27;order_id&#x27; is a required",
        ),
    ],
)
def test_it_rejects_bad_input_and_writes_nothing(
    operator_client: Client, unknown: ToolCall, data: dict[str, str], field: str, message: str
) -> None:
    before = fields_of(unknown)

    response = operator_client.post(settle_url(unknown), data)

    assert response.status_code == 200
    assert response.context["form"].errors[field]
    page = response.content.decode()
    assert "Nothing was settled" in page
    assert message in page
    assert fields_of(unknown) == before
    assert not SETTLED.exists()


@pytest.mark.parametrize("persona", ["reviewer", "support"])
def test_it_forbids_non_operators_to_settle(persona: str, request: Any, unknown: ToolCall) -> None:
    client = logged_in(request.getfixturevalue(persona))
    before = fields_of(unknown)

    assert client.get(settle_url(unknown)).status_code == 403
    response = client.post(settle_url(unknown), {"outcome": "took_effect", "note": NOTE})

    assert response.status_code == 403
    assert b"Only operators may settle unknown outcomes." in response.content
    assert fields_of(unknown) == before
    assert not SETTLED.exists()


def test_it_forbids_outsiders_and_sends_anonymous_users_to_login(
    client: Client, outsider: Any, unknown: ToolCall
) -> None:
    data = {"outcome": "took_effect", "note": NOTE}

    assert logged_in(outsider).post(settle_url(unknown), data).status_code == 403
    assert logged_in(outsider).get("/console/unknown/").status_code == 403
    anonymous = client.post(settle_url(unknown), data)
    assert anonymous.status_code == 302
    assert anonymous["Location"].startswith("/console/login/")
    assert ToolCall.objects.get(pk=unknown.pk).status == "unknown"


def test_it_lets_a_superuser_settle(superuser: Any, unknown: ToolCall) -> None:
    response = logged_in(superuser).post(
        settle_url(unknown), {"outcome": "took_effect", "note": NOTE}
    )

    assert response.status_code == 302
    assert ToolCall.objects.get(pk=unknown.pk).settled_by == superuser


def test_it_answers_404_for_a_missing_call(operator_client: Client, console_catalog: Any) -> None:
    response = operator_client.post(
        "/console/unknown/999999/settle/", {"outcome": "took_effect", "note": NOTE}
    )

    assert response.status_code == 404
    assert not SETTLED.exists()


def test_it_shows_who_settled_a_call_on_the_run_page(
    operator_client: Client, reviewer_client: Client, run: Run, unknown: ToolCall
) -> None:
    operator_client.post(settle_url(unknown), {"outcome": "took_effect", "note": NOTE})

    page = reviewer_client.get(f"/console/runs/{run.pk}/").content.decode()

    assert "Settled by hand by <strong>olga</strong>" in page
    assert f'<span class="settle-note">{NOTE}</span>' in page


def test_it_links_an_unknown_call_on_the_run_page_to_its_settle_form_for_operators(
    operator_client: Client, reviewer_client: Client, run: Run, unknown: ToolCall
) -> None:
    link = f'<a href="{settle_url(unknown)}">Settle…</a>'

    assert link in operator_client.get(f"/console/runs/{run.pk}/").content.decode()
    reviewer_page = reviewer_client.get(f"/console/runs/{run.pk}/").content.decode()
    assert link not in reviewer_page
    assert "Outcome unknown: the worker looks again at" in reviewer_page
