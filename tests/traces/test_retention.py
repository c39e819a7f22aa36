"""The retention purge removes what is past retention and nothing else: rows built with
explicit timestamps around a 30-day retention, purged in batches of two."""

from __future__ import annotations

import runpy
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.exceptions import ImproperlyConfigured
from django.utils import timezone

from compensations.models import Compensation, Ticket, TicketEvent
from toolops.models import (
    Agent,
    Approval,
    ApprovalVote,
    Attempt,
    IdempotencyRecord,
    Run,
    ToolCall,
    new_span_id,
    new_trace_id,
)
from traces.models import FullArgsRead, ReplayCount, SealedArgs
from traces.retention import retention_purge
from traces.tasks import purge_traces

pytestmark = pytest.mark.django_db

S = ToolCall.Status
SETTINGS = Path(__file__).resolve().parents[2] / "toolops" / "settings.py"


def ago(days: float) -> datetime:
    return timezone.now() - timedelta(days=days)


class World:
    """Runs, calls and attempts, each run named for the case it stands for."""

    def __init__(self, agent: Agent) -> None:
        self.agent = agent
        self.reviewer = get_user_model().objects.create_user("reviewer")

    def run(self, name: str, status: str, *, created: float, ended: float | None = None) -> Run:
        return Run.objects.create(
            agent=self.agent,
            run_id=name,
            trace_id=new_trace_id(),
            status=status,
            created_at=ago(created),
            ended_at=None if ended is None else ago(ended),
        )

    def call(
        self,
        run: Run,
        step: int,
        *,
        days: float,
        status: str = S.SUCCEEDED,
        attempts: int = 1,
        tool: str = "search",
        key: str = "",
    ) -> ToolCall:
        call = ToolCall.objects.create(
            call_id=f"{run.run_id}-{step}",
            run=run,
            tool_call_id=f"tc-{step}",
            step_index=step,
            tool=tool,
            args_digest=f"{run.run_id}-{step}-args",
            idempotency_key=key,
            status=status,
            created_at=ago(days),
        )
        for number in range(1, attempts + 1):
            Attempt.objects.create(
                call=call,
                tool=tool,
                number=number,
                span_id=new_span_id(),
                started_at=ago(days),
                duration_ms=1.0,
                outcome="ok",
            )
        return call

    def compensation(self, call: ToolCall, status: str, *, key: str = "") -> Compensation:
        return Compensation.objects.create(
            run=call.run, call=call, tool="undo", status=status, key=key or f"undo-{call.pk}"
        )

    def ticket(self, compensation: Compensation, status: str) -> Ticket:
        ticket = Ticket.objects.create(
            compensation=compensation,
            run=compensation.run,
            tool="undo",
            status=status,
            reason=Ticket.Reason.DEAD_LETTERED,
        )
        TicketEvent.objects.create(ticket=ticket, kind=TicketEvent.Kind.OPENED)
        return ticket

    def approval(self, run: Run, status: str, *, vote: bool = False) -> Approval:
        approval = Approval.objects.create(
            run=run,
            tool="charge",
            reason=Approval.Reason.POLICY,
            args_hash="h",
            status=status,
            expires_at=ago(-1),
        )
        if vote:
            ApprovalVote.objects.create(
                approval=approval, reviewer=self.reviewer, decision="approve", args_hash="h"
            )
        return approval


def record(key: str, *, state: str = "recorded", expires: float, call_ref: str = "") -> None:
    IdempotencyRecord.objects.create(
        key=key,
        call_ref=call_ref or f"c-{key}",
        tool="charge",
        state=state,
        lease_until=ago(40),
        expires_at=ago(expires),
    )


def build(world: World) -> dict[str, Any]:
    """Every case around a 30-day retention; returns the rows the tests look at."""
    w = world
    # Ended 40 days ago, nothing open: goes, with everything under it.
    done = w.run("done-old", Run.Status.COMPLETED, created=45, ended=40)
    done_calls = [
        w.call(done, 1, days=41, attempts=2),
        w.call(done, 2, days=41, attempts=2, tool="charge", key="k-done"),
        w.call(done, 3, days=41, attempts=2),
    ]
    record("k-done", expires=33, call_ref=done_calls[1].call_id)
    w.ticket(w.compensation(done_calls[1], Compensation.Status.DISCARDED), Ticket.Status.CLOSED)
    w.approval(done, Approval.Status.APPROVED, vote=True)
    read = FullArgsRead.objects.create(
        user=w.reviewer, call=done_calls[0], call_ref=done_calls[0].call_id, purpose="console"
    )
    aborted = w.run("aborted-old", Run.Status.ABORTED, created=36, ended=35)
    w.call(aborted, 1, days=36)

    # Still running after 60 days: stays, but for the old attempts of settled calls.
    running = w.run("running-old", Run.Status.RUNNING, created=60)
    w.call(running, 1, days=60, attempts=2)
    w.call(running, 2, days=1)
    w.call(running, 3, days=50, status=S.UNKNOWN)  # a person settles it from its attempts
    # Being compensated, or waiting for support or a reviewer: everything stays.
    aborting = w.run("aborting", Run.Status.ABORTING, created=60)
    w.compensation(w.call(aborting, 1, days=55), Compensation.Status.PENDING, key="d-comp")
    ticketed = w.run("ticket-open", Run.Status.COMPENSATION_FAILED, created=45, ended=40)
    failed = w.compensation(w.call(ticketed, 1, days=41), Compensation.Status.DEAD_LETTERED)
    w.ticket(failed, Ticket.Status.OPEN)
    waiting = w.run("approval-pending", Run.Status.RUNNING, created=40)
    w.call(waiting, 1, days=39)
    w.call(waiting, 2, days=39, status=S.PENDING_APPROVAL, attempts=0)
    w.approval(waiting, Approval.Status.PENDING)
    # Ended long ago, but a call's outcome is unknown: stays whole.
    unknown = w.run("unknown-old", Run.Status.COMPLETED, created=45, ended=40)
    w.call(unknown, 1, days=41, status=S.UNKNOWN)
    # Ended long ago, but its key replays the call until it expires: the run and its
    # calls stay, its old attempts go.
    keyed = w.run("key-live", Run.Status.COMPLETED, created=45, ended=40)
    record("k-live", expires=-5, call_ref=w.call(keyed, 1, days=41, key="k-live").call_id)
    # Within retention, or ended within it after a long life (its old attempts go).
    recent = w.run("recent", Run.Status.COMPLETED, created=12, ended=10)
    w.call(recent, 1, days=12)
    long = w.run("long-lived", Run.Status.COMPLETED, created=50, ended=5)
    w.call(long, 1, days=45)
    w.call(long, 2, days=6)

    for key in ("k-old1", "k-old2", "k-old3", "k-old4"):
        record(key, expires=1)
    record("k-fresh", expires=-1)
    record("k-claimed", state="claimed", expires=1)  # the stale-claim sweep's to settle

    for tool, days in (("search", 31), ("search", 40), ("search", 29), ("charge", 100)):
        ReplayCount.objects.create(tool=tool, minute=ago(days), count=3)
    ReplayCount.objects.create(tool="charge", minute=ago(0), count=1)

    # Sealed args are their call's (by call_id) or their compensation's (by key). A row
    # keyed by a live call's args hash, as they once were, is no one's any more.
    for owner, days in (
        ("done-old-1", 45),
        ("d-orphan", 40),
        ("running-old-1", 60),
        ("d-new", 1),
        ("d-comp", 40),
        ("running-old-2-args", 40),
    ):
        SealedArgs.objects.create(digest=owner, token="sealed", created_at=ago(days))
    return {"read": read}


EXPECTED = {
    "toolops.IdempotencyRecord": 5,  # k-done, k-old1..4
    "toolops.Run": 2,  # done-old, aborted-old
    "toolops.ToolCall": 4,
    # done-old 6, aborted-old 1; running-old's first call 2, key-live 1, long-lived 1
    "toolops.Attempt": 11,
    "traces.ReplayCount": 3,
    # done-old-1 (its call went with its run), d-orphan, running-old-2-args
    "traces.SealedArgs": 3,
    # Under done-old.
    "compensations.Compensation": 1,
    "compensations.Ticket": 1,
    "compensations.TicketEvent": 1,
    "toolops.Approval": 1,
    "toolops.ApprovalVote": 1,
}


def attempts_left() -> set[tuple[str, int]]:
    return {(a.call.call_id, a.number) for a in Attempt.objects.select_related("call")}


def test_it_removes_what_is_past_retention_and_nothing_else(agent_a: Any) -> None:
    rows = build(World(agent_a[0]))

    counts = retention_purge(days=30, batch=2, runs_per_batch=1)

    assert counts == EXPECTED
    assert set(Run.objects.values_list("run_id", flat=True)) == {
        "running-old",
        "aborting",
        "ticket-open",
        "approval-pending",
        "unknown-old",
        "key-live",
        "recent",
        "long-lived",
    }
    assert set(ToolCall.objects.values_list("call_id", flat=True)) == {
        "running-old-1",
        "running-old-2",
        "running-old-3",
        "aborting-1",
        "ticket-open-1",
        "approval-pending-1",
        "approval-pending-2",
        "unknown-old-1",
        "key-live-1",
        "recent-1",
        "long-lived-1",
        "long-lived-2",
    }
    assert attempts_left() == {
        ("running-old-2", 1),
        ("running-old-3", 1),
        ("aborting-1", 1),
        ("ticket-open-1", 1),
        ("approval-pending-1", 1),
        ("unknown-old-1", 1),
        ("recent-1", 1),
        ("long-lived-2", 1),
    }
    assert set(IdempotencyRecord.objects.values_list("key", flat=True)) == {
        "k-live",
        "k-fresh",
        "k-claimed",
    }
    assert sorted(ReplayCount.objects.values_list("tool", flat=True)) == ["charge", "search"]
    assert set(SealedArgs.objects.values_list("digest", flat=True)) == {
        "running-old-1",
        "d-new",
        "d-comp",
    }
    assert Compensation.objects.count() == 2
    assert Ticket.objects.get().status == Ticket.Status.OPEN
    assert Approval.objects.get().status == Approval.Status.PENDING
    # The audit of who read full args outlives the call it names.
    read = FullArgsRead.objects.get()
    assert (read.pk, read.call_id, read.call_ref) == (rows["read"].pk, None, "done-old-1")


def test_it_keeps_everything_under_a_longer_retention(agent_a: Any) -> None:
    build(World(agent_a[0]))
    before = (Run.objects.count(), ToolCall.objects.count(), Attempt.objects.count())

    counts = retention_purge(days=200, batch=2, runs_per_batch=1)

    # Only what expires by its own clock: the idempotency records.
    assert {k: v for k, v in counts.items() if v} == {"toolops.IdempotencyRecord": 5}
    assert (Run.objects.count(), ToolCall.objects.count(), Attempt.objects.count()) == before
    assert SealedArgs.objects.count() == 6


def test_it_stops_starting_batches_when_its_time_is_up(agent_a: Any) -> None:
    build(World(agent_a[0]))

    counts = retention_purge(days=30, max_seconds=0)

    assert not any(counts.values())
    assert retention_purge(days=30) == EXPECTED


def test_the_task_delivered_twice_is_harmless(agent_a: Any, settings: Any) -> None:
    build(World(agent_a[0]))
    settings.TOOLOPS_RETENTION_DAYS = 30

    assert purge_traces() == EXPECTED
    left = (attempts_left(), set(Run.objects.values_list("run_id", flat=True)))
    again = purge_traces()

    assert not any(again.values())
    assert (attempts_left(), set(Run.objects.values_list("run_id", flat=True))) == left


def settings_with(monkeypatch: pytest.MonkeyPatch, value: str | None) -> dict[str, Any]:
    """The settings module run afresh with TOOLOPS_RETENTION_DAYS as given."""
    if value is None:
        monkeypatch.delenv("TOOLOPS_RETENTION_DAYS", raising=False)
    else:
        monkeypatch.setenv("TOOLOPS_RETENTION_DAYS", value)
    return runpy.run_path(str(SETTINGS), run_name="settings_probe")


@pytest.mark.parametrize("value", ["0", "-3", "nan", "inf", "40000"])
def test_it_refuses_a_retention_that_is_not_a_positive_number_of_days(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    expected = f"TOOLOPS_RETENTION_DAYS must be a positive number of days .*'{value}'"
    with pytest.raises(ImproperlyConfigured, match=expected):
        settings_with(monkeypatch, value)


def test_it_names_a_retention_that_is_not_a_number(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ImproperlyConfigured, match="TOOLOPS_RETENTION_DAYS must be a number"):
        settings_with(monkeypatch, "a month")


def test_it_keeps_thirty_days_unless_told(monkeypatch: pytest.MonkeyPatch) -> None:
    assert settings_with(monkeypatch, None)["TOOLOPS_RETENTION_DAYS"] == 30.0
    assert settings_with(monkeypatch, "0.5")["TOOLOPS_RETENTION_DAYS"] == 0.5


def test_a_call_with_the_same_args_seals_its_own_row_and_keeps_it(api: Any, shop: Any) -> None:
    from tests.toolops.api.helpers import create_run, post_call

    args = {"to": "jane.doe@example.com", "message": "hello"}
    create_run(api, "r-old")
    assert (
        post_call(api, "r-old", step_index=0, tool="send_notification", args=args).status_code
        == 200
    )
    SealedArgs.objects.update(created_at=ago(40))
    # The first call's run ends and ages out; a new run sends the same args meanwhile.
    Run.objects.filter(run_id="r-old").update(status=Run.Status.COMPLETED, ended_at=ago(40))
    IdempotencyRecord.objects.update(expires_at=ago(33))
    create_run(api, "r-new")
    assert (
        post_call(api, "r-new", step_index=0, tool="send_notification", args=args).status_code
        == 200
    )
    assert SealedArgs.objects.count() == 2

    retention_purge(days=30)

    assert not Run.objects.filter(run_id="r-old").exists()
    (new,) = ToolCall.objects.all()
    assert list(SealedArgs.objects.values_list("digest", flat=True)) == [new.call_id]
