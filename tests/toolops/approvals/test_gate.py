"""The approval gate and what follows a decision (API.md: `pending_approval`, the
`approval` object, `wait`, rejection and expiry, session duplicates, abort), with the
worker's task body called in-process; the real worker and browser are elsewhere."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any
from unittest.mock import patch

import pytest
from django.db import connection
from django.utils import timezone
from rest_framework.test import APIClient

from tests.conftest import Shop
from tests.console.conftest import make_user
from tests.toolops.api.helpers import body, create_run, post_call
from toolops.approvals.services import DecisionRefused, approval_decide, approvals_expire
from toolops.models import Approval, ApprovalVote, IdempotencyRecord, Run, ToolCall, ToolPolicy
from toolops.tasks import execute_approved_call

pytestmark = pytest.mark.django_db

CHARGE = {"order_id": "ord-9", "amount": "199.00"}
ORDER = {"sku": "A12", "qty": 1, "amount": "19.90"}


def charge(api: APIClient, run_id: str = "r-1", **extra: Any) -> Any:
    return post_call(api, run_id, step_index=3, tool="charge", args=CHARGE, **extra)


def held(api: APIClient, run_id: str = "r-1") -> dict[str, Any]:
    response = charge(api, run_id)
    assert response.status_code == 202, response.content
    return body(response)


def decide(approval_id: str, who: Any, approve: bool, note: str = "") -> Approval:
    approval = Approval.objects.get(approval_id=approval_id)
    return approval_decide(
        approval=approval, by=who, approve=approve, note=note, args_hash=approval.args_hash
    )


def approve_without_worker(call: dict[str, Any], who: Any) -> None:
    """Approve; the worker's message goes nowhere (the test runs the task body itself)."""
    with patch("toolops.tasks.execute_approved_call.delay", autospec=True):
        decide(call["approval"]["approval_id"], who, approve=True)


@pytest.fixture
def rita(django_user_model: Any) -> Any:
    return make_user(django_user_model, "rita", "reviewers")


@pytest.fixture
def raj(django_user_model: Any) -> Any:
    return make_user(django_user_model, "raj", "reviewers")


def test_a_charge_waits_for_a_person_and_sends_nothing(api: APIClient, shop: Shop) -> None:
    create_run(api)

    call = held(api)

    assert call["status"] == "pending_approval"
    approval = call["approval"]
    assert approval["status"] == "pending"
    assert approval["reason"] == "irreversible"
    assert approval["url"] == f"/console/approvals/{approval['approval_id']}/"
    assert approval["duplicate_of"] is None and approval["decided_by"] is None
    assert approval["expires_at"].endswith("Z")
    assert "waiting for a reviewer" in call["feedback"]
    assert shop.requests() == []
    # The same request again is the same pending call, never a second approval.
    again = charge(api)
    assert again.status_code == 202
    assert body(again)["call_id"] == call["call_id"] and body(again)["replayed"] is True
    assert Approval.objects.count() == 1
    # GET answers 202 while it waits, with the same approval.
    got = api.get(f"/api/v1/calls/{call['call_id']}")
    assert got.status_code == 202 and body(got)["approval"] == approval


def test_policy_holds_a_compensable_write_with_reason_policy(api: APIClient, shop: Shop) -> None:
    create_run(api)

    response = post_call(api, step_index=0, tool="create_order", args=ORDER)

    assert body(response)["approval"]["reason"] == "policy"
    assert shop.requests() == []


def test_an_approved_charge_runs_once_through_the_executor(
    api: APIClient, shop: Shop, rita: Any, django_capture_on_commit_callbacks: Any
) -> None:
    create_run(api)
    call = held(api)
    with (
        patch("toolops.tasks.execute_approved_call.delay", autospec=True) as delay,
        django_capture_on_commit_callbacks(execute=True),
    ):
        decide(call["approval"]["approval_id"], rita, approve=True, note="customer confirmed")

    approval = Approval.objects.get()
    delay.assert_called_once_with(approval.pk)
    assert ToolCall.objects.get(call_id=call["call_id"]).status == "in_progress"
    assert shop.requests() == []

    assert execute_approved_call(approval.pk) == "succeeded"
    assert execute_approved_call(approval.pk) == "skipped"  # delivered twice

    done = body(api.get(f"/api/v1/calls/{call['call_id']}"))
    assert done["status"] == "succeeded"
    assert done["approval"]["status"] == "approved"
    assert done["approval"]["decided_by"] == "rita"
    assert done["approval"]["note"] == "customer confirmed"
    assert len(shop.requests("/payments/charges")) == 1
    # Its undo was registered with its result, like any successful write.
    assert body(api.get("/api/v1/runs/r-1"))["compensations"] == [
        {"tool": "refund", "status": "registered", "for_tool_call_id": done["tool_call_id"]}
    ]


def test_a_long_poll_returns_the_outcome_once_it_comes(
    api: APIClient, shop: Shop, rita: Any, transactional_db: None
) -> None:
    create_run(api)
    call = held(api)
    approval = Approval.objects.get()

    def reviewer_then_worker() -> None:
        try:
            decide(approval.approval_id, rita, approve=True)
            execute_approved_call(approval.pk)
        finally:
            connection.close()

    with patch("toolops.tasks.execute_approved_call.delay", autospec=True):
        worker = threading.Timer(0.5, reviewer_then_worker)
        worker.start()
        polled = api.get(f"/api/v1/calls/{call['call_id']}", {"wait": 10})
        worker.join()

    assert polled.status_code == 200
    assert body(polled)["status"] == "succeeded"
    assert body(polled)["approval"]["status"] == "approved"


def test_a_rejection_ends_the_call_with_the_reviewers_note(
    api: APIClient, shop: Shop, rita: Any
) -> None:
    create_run(api)
    call = held(api)

    decide(call["approval"]["approval_id"], rita, approve=False, note="ord-9 is a test order.")

    done = body(api.get(f"/api/v1/calls/{call['call_id']}"))
    assert done["status"] == "rejected"
    assert done["error"]["reason"] == "rejected"
    assert "ord-9 is a test order." in done["feedback"]
    assert done["approval"]["status"] == "rejected" and done["approval"]["decided_by"] == "rita"
    assert shop.requests() == []
    # The claim is recorded: the same request again answers the rejection.
    again = charge(api)
    assert again.status_code == 200 and body(again)["status"] == "rejected"
    assert IdempotencyRecord.objects.get().state == "recorded"


def test_an_expired_approval_ends_rejected_and_nothing_runs(api: APIClient, shop: Shop) -> None:
    create_run(api)
    call = held(api)
    Approval.objects.update(expires_at=timezone.now() - timedelta(seconds=1))

    assert approvals_expire() == 1

    done = body(api.get(f"/api/v1/calls/{call['call_id']}"))
    assert (done["status"], done["error"]["reason"]) == ("rejected", "expired")
    assert done["approval"]["status"] == "expired"
    assert "in time" in done["feedback"]
    assert execute_approved_call(Approval.objects.get().pk) == "skipped"
    assert shop.requests() == []


def test_a_decision_after_expiry_is_refused_and_the_expiry_kept(
    api: APIClient, shop: Shop, rita: Any
) -> None:
    create_run(api)
    call = held(api)
    Approval.objects.update(expires_at=timezone.now() - timedelta(seconds=1))

    with pytest.raises(DecisionRefused, match="expired"):
        decide(call["approval"]["approval_id"], rita, approve=True)

    assert Approval.objects.get().status == "expired"
    assert ToolCall.objects.get(call_id=call["call_id"]).error_reason == "expired"


@pytest.mark.parametrize(
    ("approve", "note", "hash_ok", "problem"),
    [
        (False, "  ", True, "A note is required"),
        (True, "", False, "not the ones you were shown"),
    ],
)
def test_it_refuses_bad_decisions_and_changes_nothing(
    api: APIClient, shop: Shop, rita: Any, approve: bool, note: str, hash_ok: bool, problem: str
) -> None:
    create_run(api)
    held(api)
    approval = Approval.objects.get()

    with pytest.raises(DecisionRefused, match=problem):
        approval_decide(
            approval=approval,
            by=rita,
            approve=approve,
            note=note,
            args_hash=approval.args_hash if hash_ok else "0" * 64,
        )

    assert Approval.objects.get().status == "pending"
    assert not ApprovalVote.objects.exists()


def test_a_second_decision_is_told_who_decided(
    api: APIClient, shop: Shop, rita: Any, raj: Any
) -> None:
    create_run(api)
    call = held(api)
    decide(call["approval"]["approval_id"], rita, approve=False, note="no")

    with pytest.raises(DecisionRefused, match="Already decided: rejected by rita"):
        decide(call["approval"]["approval_id"], raj, approve=True)


def test_approve_and_reject_racing_make_one_decision(
    api: APIClient, shop: Shop, rita: Any, raj: Any, transactional_db: None
) -> None:
    create_run(api)
    call = held(api)
    approval_id = call["approval"]["approval_id"]
    outcomes: list[str] = []
    barrier = threading.Barrier(2)

    def race(who: Any, approve: bool) -> None:
        barrier.wait()
        try:
            decide(approval_id, who, approve=approve, note="race")
            outcomes.append("decided")
        except DecisionRefused as exc:
            outcomes.append(str(exc))
        finally:
            connection.close()

    with patch("toolops.tasks.execute_approved_call.delay", autospec=True) as delay:
        threads = [
            threading.Thread(target=race, args=(rita, True)),
            threading.Thread(target=race, args=(raj, False)),
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    assert outcomes.count("decided") == 1, outcomes
    assert any(o.startswith("Already decided") for o in outcomes), outcomes
    approval = Approval.objects.get()
    assert approval.status in ("approved", "rejected")
    assert ApprovalVote.objects.count() == 1
    executed = [execute_approved_call(approval.pk) for _ in range(2)]
    assert delay.call_count == (1 if approval.status == "approved" else 0)
    assert len(shop.requests("/payments/charges")) == (1 if approval.status == "approved" else 0)
    # Delivered twice: an approved call runs once, a rejected one never.
    assert executed == (
        ["succeeded", "skipped"] if approval.status == "approved" else ["skipped", "skipped"]
    )


def test_a_two_reviewer_tool_runs_only_after_two_distinct_approvals(
    api: APIClient, shop: Shop, rita: Any, raj: Any
) -> None:
    ToolPolicy.objects.create(tool="charge", approvals_required=2)
    create_run(api)
    call = held(api)
    approval_id = call["approval"]["approval_id"]

    decide(approval_id, rita, approve=True)
    assert Approval.objects.get().status == "pending"
    with pytest.raises(DecisionRefused, match=r"already decided on this call \(approve\)"):
        decide(approval_id, rita, approve=True)
    assert Approval.objects.get().status == "pending"
    assert shop.requests() == []

    with patch("toolops.tasks.execute_approved_call.delay", autospec=True):
        decide(approval_id, raj, approve=True)
    approval = Approval.objects.get()
    assert (approval.status, approval.decided_by) == ("approved", raj)
    assert execute_approved_call(approval.pk) == "succeeded"
    assert len(shop.requests("/payments/charges")) == 1


def test_a_second_run_in_the_session_is_held_as_a_possible_duplicate(
    api: APIClient, shop: Shop, rita: Any
) -> None:
    ToolPolicy.objects.create(tool="create_order", requires_approval=False)
    create_run(api, "r-1", session_key="conv-42")
    first = body(post_call(api, "r-1", step_index=0, tool="create_order", args=ORDER))
    assert first["status"] == "succeeded"
    create_run(api, "r-2", session_key="conv-42")

    # The same args in another form: the same canonical args.
    response = post_call(
        api,
        "r-2",
        step_index=0,
        tool="create_order",
        args={"amount": 19.9, "qty": 1, "sku": " A12 "},
    )

    assert response.status_code == 202
    second = body(response)
    assert second["approval"]["reason"] == "possible_duplicate"
    assert second["approval"]["duplicate_of"] == first["call_id"]
    decide(second["approval"]["approval_id"], rita, approve=False, note="Already ordered in r-1.")
    assert body(api.get(f"/api/v1/calls/{second['call_id']}"))["status"] == "rejected"
    assert shop.state()["counts"]["orders"] == 1


def test_no_duplicate_outside_the_session_or_window(api: APIClient, shop: Shop) -> None:
    ToolPolicy.objects.create(tool="create_order", requires_approval=False)
    create_run(api, "r-1", session_key="conv-1")
    post_call(api, "r-1", step_index=0, tool="create_order", args=ORDER)
    create_run(api, "r-2", session_key="conv-2")
    create_run(api, "r-3")
    ToolPolicy.objects.filter(tool="create_order").update(session_dedupe_window_s=0)
    create_run(api, "r-4", session_key="conv-1")

    for run_id in ("r-2", "r-3", "r-4"):
        answer = body(post_call(api, run_id, step_index=0, tool="create_order", args=ORDER))
        assert answer["status"] == "succeeded", (run_id, answer)
    assert shop.state()["counts"]["orders"] == 4


def test_an_abort_rejects_what_waits_for_a_person(api: APIClient, shop: Shop) -> None:
    create_run(api)
    call = held(api)

    api.post("/api/v1/runs/r-1/abort", {"reason": "user left"}, format="json")

    done = body(api.get(f"/api/v1/calls/{call['call_id']}"))
    assert (done["status"], done["error"]["reason"]) == ("rejected", "rejected")
    assert (done["approval"]["status"], done["approval"]["note"]) == ("rejected", "run aborted")
    assert Run.objects.get(run_id="r-1").status == "aborted"
    assert execute_approved_call(Approval.objects.get().pk) == "skipped"
    assert shop.requests() == []


def test_the_approved_charges_lost_answer_is_reconciled_to_one_charge(
    api: APIClient, shop: Shop, rita: Any
) -> None:
    create_run(api)
    call = held(api)
    approve_without_worker(call, rita)
    shop.fault("/payments/charges", drop_after_commit=1)

    assert execute_approved_call(Approval.objects.get().pk) == "succeeded"

    assert shop.state()["counts"]["charges"] == 1
    assert len(shop.requests("/payments/charges")) == 1
    assert len(shop.requests("/payments/charges/lookup")) >= 1
    done = body(api.get(f"/api/v1/calls/{call['call_id']}"))
    assert done["status"] == "succeeded"
    assert done["result"]["charge_id"] == shop.state()["charges"][0]["charge_id"]


@pytest.mark.skipif(connection.vendor != "postgresql", reason="statement counts are PostgreSQL's")
@pytest.mark.parametrize("session_key", [None, "conv-9"])
def test_the_gate_costs_a_write_that_needs_nobody_no_statement(
    api: APIClient, shop: Shop, settings: Any, session_key: str | None
) -> None:
    from django.test.utils import CaptureQueriesContext

    settings.TOOLOPS_POLICY_CACHE_S = 60  # as deployed: policies are cached per process
    create_run(api, "r-1", session_key=session_key)
    post_call(api, step_index=0, tool="query_stock", args={"sku": "A12"})  # warm caches

    with CaptureQueriesContext(connection) as ctx:
        answer = body(
            post_call(api, step_index=1, tool="reserve_stock", args={"sku": "A12", "qty": 1})
        )

    assert answer["status"] == "succeeded" and answer["approval"] is None
    # The savepoints are the test's own transaction around the claim, absent as deployed.
    statements = [
        q["sql"] for q in ctx.captured_queries if not q["sql"].startswith(("SAVEPOINT", "RELEASE"))
    ]
    # The run read (which also looks for a session duplicate), the claim, the record.
    assert len(statements) == 3, "\n".join(s[:100] for s in statements)
    assert "toolops_approval" not in " ".join(statements)


def test_a_reviewer_who_approved_cannot_also_reject(
    api: APIClient, shop: Shop, rita: Any, raj: Any
) -> None:
    ToolPolicy.objects.create(tool="charge", approvals_required=2)
    create_run(api)
    call = held(api)
    decide(call["approval"]["approval_id"], rita, approve=True)

    with pytest.raises(DecisionRefused, match=r"already decided on this call \(approve\)"):
        decide(call["approval"]["approval_id"], rita, approve=False, note="changed my mind")

    assert Approval.objects.get().status == "pending"
    # Another reviewer still can.
    decide(call["approval"]["approval_id"], raj, approve=False, note="not this one")
    assert Approval.objects.get().status == "rejected"


def test_a_call_held_as_its_run_is_aborted_is_refused(api: APIClient, shop: Shop) -> None:
    from toolops import executor

    create_run(api)
    # The run read by a request before the abort committed.
    run = Run.objects.get(run_id="r-1")
    request = executor.CallRequest(step_index=0, tool="charge", args=CHARGE)
    prepared = executor.prepare(request, agent_id=run.agent_id, run_id="r-1")
    stale = executor.read_context(agent=run.agent, run_id="r-1", request=request, prepared=prepared)
    assert stale is not None and stale.run.status == "running"
    api.post("/api/v1/runs/r-1/abort", {"reason": "user left"}, format="json")

    with pytest.raises(executor.RunNotRunning):
        executor.submit(stale, request, prepared)

    assert not Approval.objects.exists()
    assert not ToolCall.objects.exists()


def test_an_approved_call_not_yet_started_ends_with_the_run(
    api: APIClient, shop: Shop, rita: Any
) -> None:
    create_run(api)
    call = held(api)
    approve_without_worker(call, rita)

    api.post("/api/v1/runs/r-1/abort", {"reason": "user left"}, format="json")

    done = body(api.get(f"/api/v1/calls/{call['call_id']}"))
    assert (done["status"], done["error"]["reason"]) == ("rejected", "rejected")
    assert (done["approval"]["status"], done["approval"]["note"]) == ("rejected", "run aborted")
    assert done["approval"]["decided_by"] == "rita"  # who approved is kept
    assert "nothing was sent" in done["feedback"] and "reviewer rejected" not in done["feedback"]
    assert execute_approved_call(Approval.objects.get().pk) == "skipped"
    assert shop.requests() == []


def test_a_worker_that_starts_after_the_run_ended_sends_nothing(
    api: APIClient, shop: Shop, rita: Any
) -> None:
    create_run(api)
    call = held(api)
    approve_without_worker(call, rita)
    # Completed without the approvals service seeing it (as if in a race).
    Run.objects.filter(run_id="r-1").update(status="completed")

    assert execute_approved_call(Approval.objects.get().pk) == "skipped"

    done = body(api.get(f"/api/v1/calls/{call['call_id']}"))
    assert done["status"] == "rejected"
    assert done["approval"]["note"] == "run completed"
    assert shop.requests() == []


def test_complete_ends_what_waits_for_a_person(api: APIClient, shop: Shop) -> None:
    create_run(api)
    call = held(api)

    api.post("/api/v1/runs/r-1/complete")

    done = body(api.get(f"/api/v1/calls/{call['call_id']}"))
    assert done["status"] == "rejected"
    assert done["approval"]["note"] == "run completed"
