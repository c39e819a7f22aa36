"""The checker can fail: a made-up world that breaks one invariant is reported as that
invariant's violation, naming the operations involved; the same world intact holds."""

from __future__ import annotations

import pytest

from tests.chaos.checker import Call, Effect, Run, World, check, check_each
from tests.chaos.history import FAIL, INFO, OK, History
from tests.chaos.workload import API_KEY, SECRETS

RUN = "a1-r1"


def world() -> World:
    """One run: a reservation kept, an order approved then made, all settled."""
    history = History()
    for f, key, value in (
        ("run", RUN, {"status": "running"}),
        ("call", f"{RUN}/tc-0", {"status": "succeeded"}),
        ("call", f"{RUN}/tc-2", {"status": "pending_approval"}),
        ("read", f"{RUN}/tc-2", {"status": "succeeded"}),
        ("complete", RUN, {"status": "completed"}),
    ):
        history.complete(history.invoke("a1", f, key), OK, value)
    calls = {
        (RUN, "tc-0"): Call(
            RUN,
            "tc-0",
            "reserve_stock",
            "succeeded",
            1,
            1,
            compensation="discarded",
            sent_at=[10.0],
        ),
        (RUN, "tc-2"): Call(
            RUN,
            "tc-2",
            "create_order",
            "succeeded",
            1,
            1,
            approval="approved",
            approve_votes=1,
            decided_at=11.0,
            compensation="discarded",
            sent_at=[12.0],
        ),
    }
    return World(
        history,
        calls=calls,
        runs={RUN: Run(RUN, "completed", 20, 2, 2)},
        effects=[
            Effect("reservation", "res-1", (RUN, "tc-0")),
            Effect("order", "ord-1", (RUN, "tc-2")),
        ],
        max_attempts={"reserve_stock": 3, "create_order": 3},
        compensable={"reserve_stock", "create_order"},
        with_query={"create_order"},
        texts={"log web1": "call tc-0 succeeded; api_key=[redacted]"},
        secrets=SECRETS,
    )


def test_an_intact_world_holds() -> None:
    assert check(world()) is None


def test_a_double_effect_is_reported() -> None:
    w = world()
    w.effects.append(Effect("order", "ord-2", (RUN, "tc-2")))
    violation = check(w)
    assert violation is not None and violation.invariant == "single effect"
    assert "ord-1, ord-2" in violation.message
    assert any(op.key == f"{RUN}/tc-2" for op in violation.ops)


def test_an_effect_no_call_made_is_reported() -> None:
    w = world()
    w.effects.append(Effect("notification", "n-9", None))
    violation = check(w)
    assert violation is not None and violation.invariant == "single effect"


def test_a_lost_compensation_is_reported() -> None:
    w = world()
    w.runs[RUN].status = "aborted"
    w.calls[(RUN, "tc-0")].compensation = "pending"
    violation = check(w)
    assert violation is not None and violation.invariant == "compensations kept"
    assert "compensation pending" in violation.message


def test_a_compensation_the_shop_never_saw_is_reported() -> None:
    w = world()
    w.runs[RUN].status = "aborted"
    w.calls[(RUN, "tc-0")].compensation = "succeeded"  # but the reservation is not released
    violation = check(w)
    assert violation is not None and violation.invariant == "compensations kept"


def test_an_unresolved_info_is_reported() -> None:
    w = world()
    op = w.history.invoke("a1", "abort", RUN)
    w.history.complete(op, INFO, {"error": "ReadTimeout"})
    violation = check(w)
    assert violation is not None and violation.invariant == "info resolved"
    assert violation.ops[-1].type == INFO


def test_an_info_resolved_by_a_retry_holds() -> None:
    w = world()
    w.history.complete(w.history.invoke("a1", "complete", RUN), INFO, {"status": 502})
    w.history.complete(w.history.invoke("a1", "complete", RUN), FAIL, {"status": 409})
    assert check(w) is None


def test_an_over_budget_call_is_reported() -> None:
    w = world()
    w.calls[(RUN, "tc-0")].attempt_rows = 4
    violation = check(w)
    assert violation is not None and violation.invariant == "within budget"
    assert "4 attempts, over its 3" in violation.message


def test_an_over_budget_run_is_reported() -> None:
    w = world()
    w.runs[RUN].attempt_rows = 21
    violation = check(w)
    assert violation is not None and violation.invariant == "within budget"


@pytest.mark.parametrize("where", ["log worker1", "table toolops_toolcall", "page /console/"])
def test_a_leaked_secret_is_reported(where: str) -> None:
    w = world()
    w.texts[where] = f"args: {{'api_key': '{API_KEY}'}}"
    violation = check(w)
    assert violation is not None and violation.invariant == "no secrets"
    assert where in violation.message


def test_a_call_sent_after_a_rejection_is_reported() -> None:
    w = world()
    call = w.calls[(RUN, "tc-2")]
    call.approval, call.approve_votes, call.reject_votes = "rejected", 0, 1
    violation = check(w)
    assert violation is not None and violation.invariant == "approved once"


def test_a_call_sent_before_its_decision_is_reported() -> None:
    w = world()
    w.calls[(RUN, "tc-2")].sent_at = [10.5]
    violation = check(w)
    assert violation is not None and violation.invariant == "approved once"


def test_a_stale_claim_is_reported() -> None:
    w = world()
    w.stale_claims = ["reserve_stock c-1 (lease 5 s)"]
    violation = check(w)
    assert violation is not None and violation.invariant == "claims expire"


def test_an_answer_the_database_forgot_is_reported() -> None:
    w = world()
    w.calls[(RUN, "tc-0")].status = "failed"
    w.effects = [e for e in w.effects if e.key != (RUN, "tc-0")]
    violation = check(w)
    assert violation is not None and violation.invariant == "answers durable"


def test_each_broken_invariant_is_named() -> None:
    w = world()
    w.stale_claims = ["reserve_stock c-1 (lease 5 s)"]
    w.texts["log beat"] = API_KEY
    assert [v.invariant for v in check_each(w)] == ["claims expire", "no secrets"]
