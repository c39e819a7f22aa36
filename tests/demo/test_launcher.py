"""`manage.py demo` end to end, as a person starts it: the ports it takes, the logins and
the agent token it prints (the token once), every scenario through its own worker and
scripted reviewer, and Ctrl-C stopping everything it started."""

from __future__ import annotations

import asyncio
import re
import signal
import subprocess
from pathlib import Path

import httpx
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.waiting import wait_until
from toolops.demo import agent
from toolops.demo.logins import LOGINS_FILE, agent_token
from toolops.demo.processes import port_is_free
from toolops.management.commands.demo import CATALOG_SHOP, DEMO_CATALOG

from .launcher import (
    ROOT,
    Launcher,
    assert_until_in_utc,
    demo_env,
    free_port,
    manage,
    pid_exists,
    processes_with_env,
)

POLICY_LINE = "Agent policy: the demo's (toolops/demo/policy.toml)"


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
        runs = client.get("/console/runs/")
        assert runs.status_code == 200
        assert run_id in runs.text, runs.text[:2000]


def test_the_launcher_runs_the_demo_and_ctrl_c_stops_everything(tmp_path: Path) -> None:
    data_dir = tmp_path / "var"
    env = demo_env(data_dir)
    subprocess.run(manage("migrate", "--noinput", "-v0"), cwd=ROOT, env=env, check=True)
    port, shop_port = free_port(), free_port()
    # The demo catalog, but the voucher's approval lasts 20 s, not 10 minutes: the
    # worker's sweep is seen expiring it within the test.
    env["TOOLOPS_TOOLS_FILE"] = str(short_voucher_catalog(tmp_path, shop_port))
    launcher = Launcher(["--port", str(port), "--shop-port", str(shop_port)], env)
    try:
        launcher.wait_for("Ctrl-C stops everything.", timeout_s=120)
        children = launcher.children()
        assert set(children) == {"shop", "web", "worker", "reviewer"}
        assert all(pid_exists(pid) for pid in children.values())
        summary = next(x for x in launcher.lines if x.startswith("demo agent:"))
        total = len(agent.SCENARIOS)
        assert summary == f"demo agent: {total} scenarios, {total} ok", launcher.output
        # The demo's policy, applied before the children start; demo-cashier meets its
        # daily limit on SQLite too.
        assert f"{POLICY_LINE} applied as v1" in launcher.lines, launcher.output
        line = next(x for x in launcher.lines if x.startswith("✓ daily limit:"))
        assert "(434.00 spent); it resets at 00:00 UTC. Ask the user or stop." in line, line
        # On SQLite and the filesystem broker, the launcher's worker undoes the aborts.
        sagas = {
            "abort": "aborted in",
            "saga abort": "aborted in",
            "dead letter": "compensation_failed",
        }
        for name, text in sagas.items():
            line = next(x for x in launcher.lines if x.startswith(f"✓ {name}:"))
            assert text in line, line
        # The launcher's scripted reviewer approved the happy path's order and charge.
        line = next(x for x in launcher.lines if x.startswith("✓ happy-path order:"))
        assert "approved by reviewer (the demo's scripted reviewer)" in line, line
        for name in ("charge waits for a reviewer", "possible duplicate", "approval expires"):
            line = next(x for x in launcher.lines if x.startswith(f"✓ {name}:"))
            assert "202 pending_approval" in line and "/console/approvals/ap-" in line, line
        happy = re.search(r"run (demo-\S+-1-happy)", launcher.output)
        assert happy, launcher.output
        assert (data_dir / "demo-logins.txt").stat().st_mode & 0o777 == 0o600
        assert (data_dir / "log" / "worker.log").exists()

        check_console(f"http://127.0.0.1:{port}", launcher.password("operator"), happy[1])
        # The new agent token is printed whole, once, and works for MCP.
        token = agent_token(data_dir / LOGINS_FILE)
        assert launcher.output.count(token) == 1, launcher.output
        assert next(x for x in launcher.lines if x.startswith("Agent demo-agent: ")).startswith(
            f"Agent demo-agent: token {token}  (shown this once"
        )
        check_mcp(next(x for x in launcher.lines if x.startswith("MCP: ")), token)
        assert any(x.startswith("Watch an approval expire: ") for x in launcher.lines)
        check_notifications(f"http://127.0.0.1:{port}", launcher.password("operator"), data_dir)
        # Nobody decides the voucher: the worker's periodic sweep expires it (20 s, then
        # within 15 s), and the agent's watcher, still running in the launcher, says so.
        expired = launcher.wait_for("↳ approval expires:", timeout_s=60)
        assert "send_voucher expired" in expired, expired

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


def check_notifications(web_url: str, password: str, data_dir: Path) -> None:
    """The reviewer is e-mailed (files in the data directory) of the calls left to a
    person, and the outbox page shows what was sent."""

    def mailed() -> bool:
        texts = [f.read_text() for f in (data_dir / "mail").glob("*.log")]
        return any("Approval waiting: " in t and "To: reviewer@example.com" in t for t in texts)

    wait_until(mailed, 60, every=0.5, failure="no approval e-mail in the data directory")
    with httpx.Client(base_url=web_url, follow_redirects=True, timeout=20) as client:
        log_in(client, "operator", password)
        page = client.get("/console/notifications/?status=sent").text
    assert "reviewer@example.com" in page and "Approval waiting: " in page, page[:3000]


def short_voucher_catalog(tmp_path: Path, shop_port: int) -> Path:
    """The demo catalog for a shop on `shop_port`, its voucher's approval lasting 20 s."""
    text = DEMO_CATALOG.read_text().replace(CATALOG_SHOP, f"http://127.0.0.1:{shop_port}")
    assert "approval_ttl_s = 600\n" in text
    path = tmp_path / "catalog.toml"
    path.write_text(text.replace("approval_ttl_s = 600\n", "approval_ttl_s = 20\n"))
    return path


def check_mcp(line: str, token: str) -> None:
    """The banner's MCP URL, with the agent's token, works with the SDK's own client, on
    SQLite too; the line itself does not repeat the token."""
    found = re.match(r"MCP: (\S+) .*Bearer <the demo-agent token>", line)
    assert found, line
    url = found[1]

    async def listed() -> list[str]:
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)
        async with http, Client(streamable_http_client(url, http_client=http)) as client:
            return [t.name for t in (await client.list_tools()).tools]

    assert "create_order" in asyncio.run(listed())


def free_port_pair() -> int:
    """A free port whose + 1000 is free too: the web server's, then the shop's."""
    for _ in range(50):
        port = free_port()
        if port_is_free(port + 1000):
            return port
    raise AssertionError("no free pair of ports")


def test_a_re_run_reuses_logins_and_refuses_a_busy_port(tmp_path: Path) -> None:
    data_dir = tmp_path / "var"
    env = demo_env(data_dir)
    subprocess.run(manage("migrate", "--noinput", "-v0"), cwd=ROOT, env=env, check=True)
    # Only --port: the shop takes --port + 1000.
    port = free_port_pair()
    args = ["--port", str(port), "--no-agent"]

    first = Launcher(args, env)
    try:
        first.wait_for("Ctrl-C stops everything.", timeout_s=120)
        assert f"✓ shop    http://127.0.0.1:{port + 1000} " in first.output, first.output
        passwords = {name: first.password(name) for name in ("admin", "operator")}
        assert f"{POLICY_LINE} applied as v1" in first.lines, first.output
        token = agent_token(data_dir / LOGINS_FILE)
        assert first.output.count(token) == 1, first.output

        busy = subprocess.run(
            manage("demo", *args), cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
        )
        assert busy.returncode != 0
        assert f"port {port} (--port) is busy" in busy.stderr, busy.stderr
        assert "make demo PORT=" in busy.stderr, busy.stderr

        first.proc.send_signal(signal.SIGTERM)
        assert first.proc.wait(60) == 0, first.output
    finally:
        first.kill_all()

    second = Launcher(args, env)
    try:
        second.wait_for("Ctrl-C stops everything.", timeout_s=120)
        assert {name: second.password(name) for name in passwords} == passwords
        # The same policy text: no new version.
        kept = "Agent policy: v1, the demo's (toolops/demo/policy.toml), already in force"
        assert kept in second.lines, second.output
        # The same token, not printed again: its first characters and where it is kept.
        assert agent_token(data_dir / LOGINS_FILE) == token
        assert token not in second.output, second.output
        line = next(x for x in second.lines if x.startswith("Agent demo-agent"))
        assert f"token {token[:9]}…" in line and str(data_dir / LOGINS_FILE) in line, line
        second.proc.send_signal(signal.SIGINT)
        assert second.proc.wait(60) == 0, second.output
    finally:
        second.kill_all()
