"""The scripted demo agent against a real ToolOps server (`manage.py demo` end to end is
test_launcher.py)."""

from __future__ import annotations

import io
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.utils import timezone

from compensations.models import Ticket
from tests.conftest import server_env
from tests.waiting import wait_until
from tests.worker import Worker
from toolops.approvals.services import approvals_expire
from toolops.demo import agent, reviewer, saga, scenario
from toolops.demo.logins import CASHIER_NAME
from toolops.demo.policy import demo_policy_apply
from toolops.models import Agent, Approval, AuditEntry, CircuitBreaker, Run, ToolCall
from toolops.policy.models import SpendCounter
from toolops.services import agent_create
from toolops.tasks import reconcile_unknown_calls
from toolops.tools import registry
from toolops.tools.facts import title

from .launcher import ROOT, assert_until_in_utc

# What each scenario leaves its runs as. create_order and charge wait for a reviewer:
# the scripted reviewer approves them in the resilience scenarios' runs, so those run
# through; the approval scenarios leave a call waiting for a person (`running`). The
# charge timeout may stay unknown while a worker reconciles it. The aborted runs are
# undone by a real worker.
EXPECTED_STATUSES = {
    "happy-path order": {"completed"},
    "lost response": {"completed"},
    "charge timeout": {"completed", "running"},
    "flaky read": {"completed"},
    "rate-limited read": {"completed"},
    "replay": {"completed"},
    "bad input": {"completed"},
    "budget": {"budget_exhausted"},
    "abort": {"aborted"},
    "saga abort": {"aborted"},
    "dead letter": {"compensation_failed"},
    # The order's run completes; the run of the call a person decides stays running.
    "charge waits for a reviewer": {"completed", "running"},
    "possible duplicate": {"completed", "running"},
    "approval expires": {"running"},
    "dependency": {"completed"},
    "circuit breaker": {"completed"},
    # Left running: its charge is unknown until the worker (or a person) settles it.
    "unknown charge": {"running"},
    "degraded search": {"completed"},
    "partial summary": {"completed"},
    "sensitive data": {"completed"},
    "metrics": {"completed"},
    # demo-cashier's run: five charges, then one its daily limit refuses (spend.py).
    "daily limit": {"completed"},
}


def run_agent(
    url: str, token: str, shop_url: str, out: io.StringIO | None = None, cashier_token: str = ""
) -> tuple[int, str]:
    out = out or io.StringIO()
    argv = ["--url", url, "--token", token, "--shop", shop_url]
    if cashier_token:
        argv += ["--cashier-token", cashier_token]
    code = agent.main(argv, out=out)
    return code, out.getvalue()


@pytest.fixture
def scripted_reviewer(transactional_db: None) -> Iterator[Callable[[Path], User]]:
    """Start the demo's scripted reviewer (`python -m toolops.demo.reviewer`, as
    `manage.py demo` does) on the test database: `scripted_reviewer(data_dir)` → the
    `reviewer` user it decides as. It shares the data directory of the worker, hence its
    broker: an approval's message reaches that worker."""
    procs: list[subprocess.Popen[bytes]] = []

    def start(data_dir: Path) -> User:
        user = User.objects.create_user("reviewer", "", "not-used")
        user.groups.add(Group.objects.get_or_create(name="reviewers")[0])
        log = data_dir / "reviewer.log"
        env = server_env(TOOLOPS_DATA_DIR=str(data_dir), PYTHONUNBUFFERED="1")
        with log.open("wb") as fh:
            procs.append(
                subprocess.Popen(
                    [sys.executable, *reviewer.ARGS],
                    cwd=ROOT,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=fh,
                    stderr=subprocess.STDOUT,
                )
            )

        def ready() -> bool:
            assert procs[-1].poll() is None, log.read_text()
            return reviewer.READY in log.read_text()

        wait_until(ready, 60, failure=lambda: f"the reviewer did not start:\n{log.read_text()}")
        return user

    yield start
    # Stopped before the test database is flushed.
    for proc in procs:
        proc.terminate()
        assert proc.wait(15) == 0


def test_the_scripted_agent_runs_every_scenario(
    worker: Callable[..., Worker],
    toolops_server: Any,
    shop: Any,
    agent_a: tuple[Agent, str],
    scripted_reviewer: Callable[[Path], User],
    settings: Any,
) -> None:
    # The server shares the worker's data directory, hence its broker: the aborts wake it,
    # and so do the scripted reviewer's approvals.
    w = worker()
    server = toolops_server(TOOLOPS_DATA_DIR=str(w.data_dir))
    person = scripted_reviewer(w.data_dir)
    # As `manage.py demo` starts: demo-cashier, and the demo's policy in force, which
    # every other scenario must run through unchanged.
    cashier = agent_create(name=CASHIER_NAME)
    demo_policy_apply(catalog=settings.TOOLOPS_TOOLS_FILE)
    out = io.StringIO()
    started = time.monotonic()
    code, output = run_agent(server.url, agent_a[1], shop.url, out, cashier[1])
    elapsed = time.monotonic() - started

    assert code == 0, f"{output}\nworker output:\n{w.output()}"
    assert f"demo agent: {len(agent.SCENARIOS)} scenarios, {len(agent.SCENARIOS)} ok" in output
    assert "✗" not in output, output
    assert elapsed < 60, f"the demo agent took {elapsed:.0f} s"
    lines = {line.split(":", 1)[0][2:]: line for line in output.splitlines() if line[:2] == "✓ "}
    assert set(lines) == set(EXPECTED_STATUSES), output

    runs = {r.run_id: r for r in Run.objects.filter(agent__in=[agent_a[0], cashier[0]])}
    for name, statuses in EXPECTED_STATUSES.items():
        run_ids = re.findall(r"run (demo-\S+?)[: ]", lines[name])
        assert run_ids, lines[name]
        for run_id in run_ids:
            assert run_id in runs, f"{name}: run {run_id} is not in the database"
            assert runs[run_id].status in statuses, f"{name}: {run_id} is {runs[run_id].status}"

    # Every fault was cleared, and nothing was ordered or charged twice.
    assert shop.http.get("/_shop/faults").json() == {"faults": {}}
    state = shop.state()
    references = [o["client_reference"] for o in state["orders"]]
    assert len(references) == len(set(references))
    charged = [c["order_id"] for c in state["charges"]]
    assert len(charged) == len(set(charged))

    check_sagas(lines, runs, shop)
    check_new_scenarios(lines, runs, shop)
    check_scripted_reviewer(lines, runs, person)
    check_approval_scenarios(lines, runs, shop, out)
    check_observing(lines, runs, shop)
    check_policy(lines, runs, cashier[0])


def run_of(line: str, runs: dict[str, Run]) -> Run:
    [run_id] = re.findall(r"run (demo-\S+?)[: ]", line)
    return runs[run_id]


def calls_of(run: Run) -> list[ToolCall]:
    return list(run.calls.order_by("created_at", "pk"))


def undos_run(run: Run) -> list[tuple[str, str]]:
    """The run's compensations in the order the worker runs them: newest first."""
    return list(run.compensations.order_by("-pk").values_list("tool", "status"))


def check_sagas(lines: dict[str, str], runs: dict[str, Run], shop: Any) -> None:
    """The aborted runs, as the worker left them and the console shows them."""
    line = lines["abort"]
    run = run_of(line, runs)
    assert run.status == "aborted" and run.ended_at is not None
    assert undos_run(run) == [("release_stock", "succeeded")]
    assert "release_stock succeeded" in line and "is released" in line, line

    # Saga abort: all three undone, newest first, and nothing for the support desk.
    line = lines["saga abort"]
    run = run_of(line, runs)
    assert run.status == "aborted"
    assert undos_run(run) == [
        ("refund", "succeeded"),
        ("cancel_order", "succeeded"),
        ("release_stock", "succeeded"),
    ]
    assert "refund → cancel_order → release_stock" in line, line
    assert f"/console/runs/?q={run.run_id}" in line, line
    assert not Ticket.objects.filter(run=run).exists()

    # Dead letter: refund dead-lettered after its 3 attempts, the older undos still ran,
    # a ticket is open for it, and the shop has healed (every fault is spent or cleared).
    line = lines["dead letter"]
    run = run_of(line, runs)
    assert run.status == "compensation_failed"
    assert undos_run(run) == [
        ("refund", "dead_lettered"),
        ("cancel_order", "succeeded"),
        ("release_stock", "succeeded"),
    ]
    [ticket] = Ticket.objects.filter(run=run)
    assert (ticket.tool, ticket.status) == ("refund", "open")
    assert "/console/tickets/" in line and "Retry" in line and "Resolve" in line, line
    refunds = shop.requests(saga.UNDO_PATHS["refund"])
    sent = [r["status"] for r in refunds if r["headers"]["x-toolops-run-id"] == run.run_id]
    assert sent == [503] * saga.REFUND_ATTEMPTS


def check_observing(lines: dict[str, str], runs: dict[str, Run], shop: Any) -> None:
    """Sensitive args reach the shop whole and are stored redacted; /metrics counted."""
    from toolops.demo.observe import API_KEY, CARD
    from toolops.demo.scenario import CUSTOMER

    [call] = calls_of(run_of(lines["sensitive data"], runs))
    stored = repr((call.args, call.result, call.error_message))
    for secret in (CUSTOMER, CARD, API_KEY):
        assert secret not in stored, stored
    [sent] = [r for r in shop.requests("/notifications") if r["body"].get("api_key") == API_KEY]
    assert sent["body"]["to"] == CUSTOMER and CARD in sent["body"]["message"]
    line = lines["metrics"]
    assert "3 requests for 1 reserve_stock call, then 1 replay" in line, line


def check_new_scenarios(lines: dict[str, str], runs: dict[str, Run], shop: Any) -> None:
    """What the console shows for the breaker, unknown, degraded and partial scenarios."""
    # Circuit breaker: legacy_inventory's breaker is open, and only its.
    line = lines["circuit breaker"]
    assert "circuit_open with 0 attempts" in line and "available=false" in line, line
    assert_until_in_utc(line)
    calls = calls_of(run_of(line, runs))
    assert calls[-1].error_reason == "circuit_open" and calls[-1].attempts == 0
    assert all(c.status == "failed" for c in calls)
    open_breakers = CircuitBreaker.objects.exclude(state="closed")
    assert list(open_breakers.values_list("tool", flat=True)) == ["legacy_inventory"]
    # Refused calls sent nothing: every request that reached the shop was an attempt.
    sent = [
        r
        for r in shop.requests("/legacy/inventory")
        if r["headers"]["x-toolops-run-id"] == calls[0].run.run_id
    ]
    assert len(sent) == sum(c.attempts for c in calls)

    # Unknown charge: left unknown for the worker; once the worker looks, it is settled.
    line = lines["unknown charge"]
    assert "unknown after 1 attempt" in line and "within ~30 s" in line, line
    run = run_of(line, runs)
    order, charge = calls_of(run)
    assert order.status == "succeeded"
    # The live worker may have looked already; if not, run its periodic task's body now.
    if charge.status == "unknown":
        assert charge.next_reconcile_at is not None
        ToolCall.objects.filter(pk=charge.pk).update(
            next_reconcile_at=timezone.now() - timedelta(seconds=1)
        )
        reconcile_unknown_calls()
        charge.refresh_from_db()
    assert charge.status == "succeeded"
    [made] = [c for c in shop.state()["charges"] if c["order_id"] == order.result["order_id"]]
    assert charge.result["charge_id"] == made["charge_id"]

    # Degraded search: degraded, and the query_stock that depends on it still ran.
    line = lines["degraded search"]
    search, stock = calls_of(run_of(line, runs))
    assert (search.status, stock.status) == ("degraded", "succeeded")
    assert stock.depends_on == [search.tool_call_id]
    assert "Based on partial data" in line

    # Partial summary: 3 succeeded, 2 failed, and the summary printed says so first.
    line = lines["partial summary"]
    statuses = [c.status for c in calls_of(run_of(line, runs))]
    assert statuses == ["succeeded", "succeeded", "failed", "succeeded", "failed"]
    assert "“Based on partial data: 3 of 5 tool calls succeeded;" in line, line
    assert "query_stock (tc-3)" in line and "reserve_stock (tc-5)" in line, line


def check_scripted_reviewer(lines: dict[str, str], runs: dict[str, Run], person: User) -> None:
    """The resilience scenarios ran through: the scripted reviewer approved their
    create_order and charge, each decision audited like a person's."""
    line = lines["happy-path order"]
    assert "create_order and charge approved by reviewer (the demo's scripted reviewer)" in line
    run = run_of(line, runs)
    assert run.status == "completed"
    calls = {c.tool: c for c in calls_of(run)}
    assert [c.status for c in calls.values()] == ["succeeded"] * 5
    for tool in ("create_order", "charge"):
        approval = calls[tool].approval
        assert approval is not None
        assert (approval.status, approval.decided_by, approval.note) == (
            "approved",
            person,
            reviewer.NOTE,
        )
        [vote] = approval.votes.all()
        assert (vote.reviewer, vote.decision) == (person, "approve")
        assert AuditEntry.objects.filter(
            actor=person, action="approval.decide", object_id=approval.approval_id
        ).exists()
    # Every approval of an auto-reviewed run was approved, and by the script only.
    auto = Approval.objects.filter(run__metadata__demo_reviewer="auto")
    assert auto.count() == 13
    assert set(auto.values_list("status", "note")) == {("approved", reviewer.NOTE)}
    others = Approval.objects.exclude(run__metadata__demo_reviewer="auto")
    assert not others.filter(decided_by=person).exists()


def check_policy(lines: dict[str, str], runs: dict[str, Run], cashier: Agent) -> None:
    """The demo's policy (toolops/demo/policy.toml) did what it says and no more: the
    happy path's charge of 199.00 waited for one reviewer under "charges over 100", its
    order carries the trial rule as `would_approve_by_two` and still needed one, the
    charge of 89.00 waits as `irreversible`, and only demo-cashier's charges count
    against the daily limit."""
    calls = {c.tool: c for c in calls_of(run_of(lines["happy-path order"], runs))}
    charge, order = calls["charge"], calls["create_order"]
    assert charge.policy_version == 1 and charge.policy_rules == [["charges over 100", "approve"]]
    assert (charge.approval.reason, charge.approval.rule) == ("policy", "charges over 100")
    assert (charge.approval.approvals_required, charge.approval.policy_version) == (1, 1)
    assert order.policy_rules == [["orders over 150 (trial)", "would_approve_by_two"]]
    assert (order.approval.reason, order.approval.approvals_required) == ("policy", 1)
    assert order.approval.rule == ""
    _, charge_run = re.findall(r"run (demo-\S+?)[: ]", lines["charge waits for a reviewer"])
    [waiting] = calls_of(runs[charge_run])
    assert waiting.policy_rules is None and waiting.approval.reason == "irreversible"

    line = lines["daily limit"]
    assert "demo-cashier charged 80.00, 95.00, 100.00, 60.00, 99.00 EUR with no reviewer" in line
    assert "(434.00 spent); it resets at 00:00 UTC. Ask the user or stop.”" in line, line
    run = run_of(line, runs)
    assert run.agent == cashier
    assert [c.status for c in calls_of(run)] == ["succeeded"] * 5 + ["failed"]
    assert list(SpendCounter.objects.values_list("agent", "spent")) == [(cashier.pk, 4_340_000)]


def check_approval_scenarios(
    lines: dict[str, str], runs: dict[str, Run], shop: Any, out: io.StringIO
) -> None:
    """The calls left to a person wait, nothing was sent for them, and the expiring one
    ends `rejected` (reason `expired`) — which the agent's watcher then prints."""
    # A charge waits for a reviewer: its approval is pending, and nothing was charged.
    line = lines["charge waits for a reviewer"]
    order_run, charge_run = (runs[r] for r in re.findall(r"run (demo-\S+?)[: ]", line))
    assert order_run.status == "completed" and charge_run.status == "running"
    [order] = calls_of(order_run)
    assert order.status == "succeeded" and order.approval.status == "approved"
    [charge] = calls_of(charge_run)
    assert charge.status == "pending_approval"
    # One conversation: the approval page lists the order among its earlier calls. The
    # charge carries the business facts its title reads (the e-mail stored redacted).
    assert order_run.session_key == charge_run.session_key
    order_id = order.result["order_id"]
    assert title(registry.get("charge"), charge.args) == (
        f"Charge 89.00 EUR to customer cus_4821 for order {order_id}"
    )
    assert scenario.CUSTOMER not in repr(charge.args)
    assert (charge.approval.status, charge.approval.reason) == ("pending", "irreversible")
    assert f"open /console/approvals/{charge.approval.approval_id}/" in line, line
    assert "202 pending_approval" in line, line
    assert not [c for c in shop.state()["charges"] if c["order_id"] == order.result["order_id"]]

    # A possible duplicate: the same order in another run of the same session is held,
    # naming the first call; one order reached the shop.
    line = lines["possible duplicate"]
    first_run, second_run = (runs[r] for r in re.findall(r"run (demo-\S+?)[: ]", line))
    assert first_run.session_key == second_run.session_key
    [first] = calls_of(first_run)
    [again] = calls_of(second_run)
    assert first.status == "succeeded" and again.status == "pending_approval"
    assert again.approval.reason == "possible_duplicate"
    assert again.approval.duplicate_of == first
    assert f"duplicate_of {first.call_id}" in line and f"call {first.call_id}" in line, line
    assert f"/console/approvals/{again.approval.approval_id}/" in line, line
    assert second_run.status == "running"
    sent = [
        r for r in shop.requests("/orders") if r["headers"]["x-toolops-run-id"] == second_run.run_id
    ]
    assert sent == []

    # The approval expires: pending until its 10 minutes are up; the worker's sweep (or,
    # not to wait for it, its task body here) ends it, and the watcher prints that.
    line = lines["approval expires"]
    assert "expires in 10 min (at " in line, line
    run = run_of(line, runs)
    [voucher] = calls_of(run)
    approval = voucher.approval
    assert approval.reason == "irreversible"
    if approval.status == "pending":
        Approval.objects.filter(pk=approval.pk).update(
            expires_at=timezone.now() - timedelta(seconds=1)
        )
        approvals_expire()
    voucher.refresh_from_db()
    approval.refresh_from_db()
    assert approval.status == "expired"
    assert (voucher.status, voucher.error_reason) == ("rejected", "expired")
    assert not [
        r for r in shop.requests("/notifications") if r["headers"]["x-toolops-run-id"] == run.run_id
    ]
    wait_until(lambda: "↳ approval expires:" in out.getvalue(), failure=out.getvalue)
    [said] = [x for x in out.getvalue().splitlines() if x.startswith("↳ approval expires:")]
    assert f"run {run.run_id}: send_voucher expired" in said, said
    assert "rejected (reason expired) and nothing was sent" in said, said
    # The other two still wait for a person: their watchers said nothing yet.
    assert "↳ charge waits" not in out.getvalue() and "↳ possible duplicate" not in out.getvalue()


def test_a_failing_scenario_is_reported_and_the_others_still_run(
    monkeypatch: pytest.MonkeyPatch, toolops_server: Any, shop: Any, agent_a: tuple[Agent, str]
) -> None:
    def broken(demo: agent.Demo) -> agent.Outcome:
        demo.new_run("broken")
        raise RuntimeError("the scenario broke")

    monkeypatch.setattr(agent, "SCENARIOS", [("broken", broken), *agent.SCENARIOS[3:5]])
    server = toolops_server()
    code, output = run_agent(server.url, agent_a[1], shop.url)

    assert code == 1
    assert "✗ broken: RuntimeError: the scenario broke" in output
    assert "✓ flaky read" in output and "✓ rate-limited read" in output
    assert "demo agent: 3 scenarios, 2 ok" in output


def test_a_call_nobody_approves_is_reported_after_the_wait(
    monkeypatch: pytest.MonkeyPatch, toolops_server: Any, shop: Any, agent_a: tuple[Agent, str]
) -> None:
    # No scripted reviewer runs: the auto-reviewed runs' calls stay pending_approval, and
    # each scenario says so once it has waited (here 1 s, not 30).
    monkeypatch.setattr(scenario, "REVIEW_WAIT_S", 1.0)
    server = toolops_server()
    out = io.StringIO()
    names = (
        "happy_path",
        "lost_response",
        "charge_timeout",
        "unknown_charge",
        "saga_abort",
        "dead_letter",
    )
    only = [arg for name in names for arg in ("--only", name)]
    code = agent.main(["--url", server.url, "--token", agent_a[1], "--shop", shop.url, *only], out)

    assert code == 0, out.getvalue()
    waiting = re.findall(r"is waiting for a reviewer at /console/approvals/ap-\w+/", out.getvalue())
    assert len(waiting) == 6, out.getvalue()
    assert "undecided after 1 s: is the scripted reviewer running?" in out.getvalue()
    assert shop.http.get("/_shop/faults").json() == {"faults": {}}
    assert set(Run.objects.filter(agent=agent_a[0]).values_list("status", flat=True)) == {"running"}
    # Nothing was sent for a call that waits.
    assert shop.state()["orders"] == []
    assert set(Approval.objects.values_list("status", flat=True)) == {"pending"}
