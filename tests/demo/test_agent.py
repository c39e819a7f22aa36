"""The scripted demo agent against a real ToolOps server, and `manage.py demo` end to end."""

from __future__ import annotations

import io
import re
import signal
import subprocess
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.utils import timezone

from compensations.models import Ticket
from tests.worker import Worker
from toolops.demo import agent, saga
from toolops.models import Agent, CircuitBreaker, Run, ToolCall
from toolops.tasks import reconcile_unknown_calls

from .launcher import (
    ROOT,
    Launcher,
    demo_env,
    free_port,
    manage,
    pid_exists,
    processes_with_env,
)

# What each scenario leaves its runs as. `running` stays possible where a call may wait
# for a reviewer (create_order and charge require approval in the catalog) or stay
# unknown while a worker reconciles it. The aborted runs are undone by a real worker.
EXPECTED_STATUSES = {
    "happy-path order": {"completed", "running"},
    "lost response": {"completed", "running"},
    "charge timeout": {"completed", "running"},
    "flaky read": {"completed"},
    "rate-limited read": {"completed"},
    "replay": {"completed"},
    "bad input": {"completed"},
    "budget": {"budget_exhausted"},
    "abort": {"aborted"},
    "saga abort": {"aborted", "running"},
    "dead letter": {"compensation_failed", "running"},
    "dependency": {"completed"},
    "circuit breaker": {"completed"},
    # Left running: its charge is unknown until the worker (or a person) settles it.
    "unknown charge": {"running"},
    "degraded search": {"completed"},
    "partial summary": {"completed"},
}


def run_agent(url: str, token: str, shop_url: str) -> tuple[int, str]:
    out = io.StringIO()
    code = agent.main(["--url", url, "--token", token, "--shop", shop_url], out=out)
    return code, out.getvalue()


def test_the_scripted_agent_runs_every_scenario(
    worker: Callable[..., Worker], toolops_server: Any, shop: Any, agent_a: tuple[Agent, str]
) -> None:
    # The server shares the worker's data directory, hence its broker: the aborts wake it.
    w = worker()
    server = toolops_server(TOOLOPS_DATA_DIR=str(w.data_dir))
    started = time.monotonic()
    code, output = run_agent(server.url, agent_a[1], shop.url)
    elapsed = time.monotonic() - started

    assert code == 0, f"{output}\nworker output:\n{w.output()}"
    assert f"demo agent: {len(agent.SCENARIOS)} scenarios, {len(agent.SCENARIOS)} ok" in output
    assert "✗" not in output, output
    assert elapsed < 60, f"the demo agent took {elapsed:.0f} s"
    lines = {line.split(":", 1)[0][2:]: line for line in output.splitlines() if line[:2] == "✓ "}
    assert set(lines) == set(EXPECTED_STATUSES), output

    runs = {r.run_id: r for r in Run.objects.filter(agent=agent_a[0])}
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


def assert_until_in_utc(line: str) -> None:
    """The circuit_open feedback names the time the tool is tried again, with its zone."""
    until = re.search(r"unavailable until (\S+?):? ", line)
    assert until, line
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(Z|[+-]\d\d:\d\d)", until[1]), line


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
        ("refund", "succeeded"), ("cancel_order", "succeeded"), ("release_stock", "succeeded"),
    ]  # fmt: skip
    assert "refund → cancel_order → release_stock" in line, line
    assert f"/console/?q={run.run_id}" in line, line
    assert not Ticket.objects.filter(run=run).exists()

    # Dead letter: refund dead-lettered after its 3 attempts, the older undos still ran,
    # a ticket is open for it, and the shop has healed (every fault is spent or cleared).
    line = lines["dead letter"]
    run = run_of(line, runs)
    assert run.status == "compensation_failed"
    assert undos_run(run) == [
        ("refund", "dead_lettered"), ("cancel_order", "succeeded"),
        ("release_stock", "succeeded"),
    ]  # fmt: skip
    [ticket] = Ticket.objects.filter(run=run)
    assert (ticket.tool, ticket.status) == ("refund", "open")
    assert "/console/tickets/" in line and "Retry" in line and "Resolve" in line, line
    refunds = shop.requests(saga.UNDO_PATHS["refund"])
    sent = [r["status"] for r in refunds if r["headers"]["x-toolops-run-id"] == run.run_id]
    assert sent == [503] * saga.REFUND_ATTEMPTS


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
        r for r in shop.requests("/legacy/inventory")
        if r["headers"]["x-toolops-run-id"] == calls[0].run.run_id
    ]  # fmt: skip
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


def test_a_call_waiting_for_a_reviewer_is_reported_not_waited_for(
    monkeypatch: pytest.MonkeyPatch, toolops_server: Any, shop: Any, agent_a: tuple[Agent, str]
) -> None:
    real_call = agent.ToolOps.call

    def gated(self: agent.ToolOps, run_id: str, step: int, tool: str, args: Any, **kw: Any) -> Any:
        if tool in ("create_order", "charge"):  # as the approval gate would answer
            url = "/console/approvals/ap-1/"
            return {"tool": tool, "status": "pending_approval", "approval": {"url": url}}
        return real_call(self, run_id, step, tool, args, **kw)

    monkeypatch.setattr(agent.ToolOps, "call", gated)
    server = toolops_server()
    out = io.StringIO()
    names = (
        "happy_path", "lost_response", "charge_timeout", "unknown_charge", "saga_abort",
        "dead_letter",
    )  # fmt: skip
    only = [arg for name in names for arg in ("--only", name)]
    code = agent.main(["--url", server.url, "--token", agent_a[1], "--shop", shop.url, *only], out)

    assert code == 0, out.getvalue()
    assert out.getvalue().count("waiting for a reviewer at /console/approvals/ap-1/") == 6
    assert shop.http.get("/_shop/faults").json() == {"faults": {}}
    assert set(Run.objects.filter(agent=agent_a[0]).values_list("status", flat=True)) == {"running"}


def log_in(client: httpx.Client, username: str, password: str) -> httpx.Response:
    page = client.get("/console/login/")
    assert page.status_code == 200, page.text
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
    assert token, page.text
    return client.post(
        "/console/login/",
        data={"username": username, "password": password, "csrfmiddlewaretoken": token[1]},
    )


def check_console(web_url: str, password: str, run_id: str) -> None:
    with httpx.Client(base_url=web_url, follow_redirects=True, timeout=20) as client:
        response = log_in(client, "operator", password)
        assert response.status_code == 200, response.text
        assert response.url.path == "/console/", f"login ended at {response.url}"
        runs = client.get("/console/")
        assert runs.status_code == 200
        assert run_id in runs.text, runs.text[:2000]


def test_the_launcher_runs_the_demo_and_ctrl_c_stops_everything(tmp_path: Path) -> None:
    data_dir = tmp_path / "var"
    env = demo_env(data_dir)
    subprocess.run(manage("migrate", "--noinput", "-v0"), cwd=ROOT, env=env, check=True)
    port, shop_port = free_port(), free_port()
    launcher = Launcher(["--port", str(port), "--shop-port", str(shop_port)], env)
    try:
        launcher.wait_for("Ctrl-C stops everything.", timeout_s=120)
        children = launcher.children()
        assert set(children) == {"shop", "web", "worker"}
        assert all(pid_exists(pid) for pid in children.values())
        summary = next(x for x in launcher.lines if x.startswith("demo agent:"))
        total = len(agent.SCENARIOS)
        assert summary == f"demo agent: {total} scenarios, {total} ok", launcher.output
        # On SQLite and the filesystem broker, the launcher's worker undoes the aborts.
        sagas = {
            "abort": "aborted in",
            "saga abort": "aborted in",
            "dead letter": "compensation_failed",
        }
        for name, text in sagas.items():
            line = next(x for x in launcher.lines if x.startswith(f"✓ {name}:"))
            assert text in line, line
        happy = re.search(r"run (demo-\S+-1-happy)", launcher.output)
        assert happy, launcher.output
        assert (data_dir / "demo-logins.txt").stat().st_mode & 0o777 == 0o600
        assert (data_dir / "log" / "worker.log").exists()

        check_console(f"http://127.0.0.1:{port}", launcher.password("operator"), happy[1])

        launcher.proc.send_signal(signal.SIGINT)
        assert launcher.proc.wait(60) == 0, launcher.output
        launcher.drain()
        assert "Stopped" in launcher.output
        assert not [name for name, pid in children.items() if pid_exists(pid)]
        # Grandchildren too (celery's embedded beat): nothing runs on this data dir.
        assert processes_with_env("TOOLOPS_DATA_DIR", str(data_dir)) == []
    finally:
        launcher.kill_all()
    # On SQLite too, the model is told when the breaker closes in UTC, not a bare time.
    assert_until_in_utc(next(x for x in launcher.lines if x.startswith("✓ circuit breaker")))


def test_a_re_run_reuses_logins_and_refuses_a_busy_port(tmp_path: Path) -> None:
    data_dir = tmp_path / "var"
    env = demo_env(data_dir)
    subprocess.run(manage("migrate", "--noinput", "-v0"), cwd=ROOT, env=env, check=True)
    port, shop_port = free_port(), free_port()
    args = ["--port", str(port), "--shop-port", str(shop_port), "--no-agent"]

    first = Launcher(args, env)
    try:
        first.wait_for("Ctrl-C stops everything.", timeout_s=120)
        passwords = {name: first.password(name) for name in ("admin", "operator")}
        token_line = next(x for x in first.lines if x.startswith("Agent demo-agent"))

        busy = subprocess.run(
            manage("demo", *args), cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
        )
        assert busy.returncode != 0
        assert f"port {port}" in busy.stderr and "busy" in busy.stderr

        first.proc.send_signal(signal.SIGTERM)
        assert first.proc.wait(60) == 0, first.output
    finally:
        first.kill_all()

    second = Launcher(args, env)
    try:
        second.wait_for("Ctrl-C stops everything.", timeout_s=120)
        assert {name: second.password(name) for name in passwords} == passwords
        assert next(x for x in second.lines if x.startswith("Agent demo-agent")) == token_line
        second.proc.send_signal(signal.SIGINT)
        assert second.proc.wait(60) == 0, second.output
    finally:
        second.kill_all()
