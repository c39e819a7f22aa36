"""`manage.py demo`: the whole product on one machine, with nothing else running.

Starts the demo shop, the web server (HTTP + WebSockets), a Celery worker with beat
embedded and the demo's scripted reviewer as child processes, on the embedded defaults
(SQLite and the filesystem broker under the data directory), loads demo users and the
demo agents, applies the demo's agent policy (toolops/demo/policy.toml; only when the
version in force reads otherwise), runs the scripted agent against the real API, then
waits. Ctrl-C (or SIGTERM) stops every child it started. The web server listens on
--port and the shop on --shop-port (--port + 1000 unless given), so a second demo with
another --port does not clash; a busy port is refused, by name and option, before
anything starts. The agent's token is printed whole once, by the run that makes it;
later runs say where it is kept.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

import httpx
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connections
from django.db.migrations.executor import MigrationExecutor

from toolops.demo import hook as demo_hook
from toolops.demo import reviewer as scripted_reviewer
from toolops.demo.accounts import DEMO_USERS, Logins, load_demo_logins
from toolops.demo.agent import run_demo
from toolops.demo.logins import (
    AGENT_NAME,
    default_path,
    token_command,
)
from toolops.demo.policy import PAGE as POLICY_PAGE
from toolops.demo.policy import demo_policy_apply
from toolops.demo.processes import (
    HOST,
    Child,
    ChildDied,
    Stop,
    check_ports,
    log_contains,
    shop_port_for,
    start_child,
    stays_up,
    stop_children,
    url_answers,
    wait_until,
)

DEMO_DIR = Path(__file__).resolve().parents[2] / "demo"
DEMO_CATALOG = DEMO_DIR / "catalog.toml"
CATALOG_SHOP = "http://127.0.0.1:9000"  # the shop URL written in the demo catalog
# A stop (Ctrl-C, SIGTERM) lets calls in progress finish, for at most 30 s.
UVICORN = ["-m", "uvicorn", "toolops.asgi:application", "--timeout-graceful-shutdown", "30"]


def catalog_for(shop_port: int, data_dir: Path) -> Path:
    """The demo catalog, rewritten into the data directory when the shop is elsewhere."""
    if shop_port == 9000:
        return DEMO_CATALOG
    path = data_dir / f"demo-catalog-{shop_port}.toml"
    text = DEMO_CATALOG.read_text().replace(CATALOG_SHOP, f"http://{HOST}:{shop_port}")
    path.write_text(text)
    return path


def child_env(shop_port: int, data_dir: Path) -> dict[str, str]:
    env = dict(os.environ)
    if not env.get("TOOLOPS_TOOLS_FILE"):
        env["TOOLOPS_TOOLS_FILE"] = str(catalog_for(shop_port, data_dir))
    env["TOOLOPS_DATA_DIR"] = str(data_dir)
    env.setdefault("DJANGO_SETTINGS_MODULE", "toolops.settings")
    # The metrics scenario reads /metrics just before and after its calls: each scrape
    # fresh, not the web process's answer of a few seconds ago.
    env.setdefault("TOOLOPS_METRICS_CACHE_S", "0")
    env["PYTHONUNBUFFERED"] = "1"  # logs reach var/log/ as they happen
    # Notifications (docs/notifications.md): e-mails written as files in the data
    # directory, and every message on the outbox page.
    env.setdefault("EMAIL_BACKEND", "django.core.mail.backends.filebased.EmailBackend")
    env.setdefault("EMAIL_FILE_PATH", str(data_dir / "mail"))
    return env


def migrate_if_needed(write: Callable[[str], None]) -> None:
    connection = connections["default"]
    executor = MigrationExecutor(connection)
    if executor.migration_plan(executor.loader.graph.leaf_nodes()):
        write("Applying database migrations…")
        call_command("migrate", interactive=False, verbosity=0)


def agent_lines(web_url: str, shop_url: str, logins: Logins) -> list[str]:
    """The agent's part of the banner. Its token is printed whole once, in the run that
    makes it (as a payments dashboard shows a new secret key once); later runs show its
    first characters and where it is kept. Nothing else prints it: the scripted agent
    reads it from the logins file."""
    token = logins.token
    if logins.token_is_new:
        told = f"token {token}  (shown this once; kept in {logins.path}, mode 0600)"
    else:
        told = (
            f"token {token[:9]}…  (shown when it was made; print it with: "
            f"{token_command(logins.path)})"
        )
    agent = f"python -m toolops.demo.agent --url {web_url} --shop {shop_url}"
    if logins.path.resolve() != default_path().resolve():
        agent += f" --logins {logins.path}"
    return [
        f"Agent {AGENT_NAME}: {told}",
        f"Run the scripted agent again: {agent}  (its token comes from {logins.path}; "
        "--only NAME runs one scenario)",
        f'Watch an approval expire: {agent} --only "approval expires" --watch  (a voucher '
        "waits for a reviewer, 10 min in the demo catalog; undecided, the worker ends it "
        "rejected and nothing is sent)",
        f"MCP: {web_url}/mcp/ (streamable HTTP) with header Authorization: Bearer <the "
        f"{AGENT_NAME} token> — client config in README.md",
    ]


# --- child processes ---------------------------------------------------------------------


class Command(BaseCommand):
    help = (
        "Run the ToolOps demo on one machine: demo shop, web server, Celery worker (with "
        "beat), demo logins and the scripted agent. Ctrl-C stops everything."
    )
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--port", type=int, default=8000, help="web server port (8000)")
        parser.add_argument(
            "--shop-port", type=int, default=None, help="demo shop port (--port + 1000: 9000)"
        )
        parser.add_argument("--no-agent", action="store_true", help="do not run the scripted agent")
        parser.add_argument(
            "--reset-shop",
            action="store_true",
            help="empty the demo shop (orders, charges, …) and restore its stock first",
        )

    def say(self, text: str = "") -> None:
        self.stdout.write(text)
        self.stdout.flush()

    def handle(self, *args: Any, **options: Any) -> None:
        port = options["port"]
        check_ports({"port": port})
        shop_port = shop_port_for(port, options["shop_port"])
        check_ports({"port": port, "shop-port": shop_port})
        data_dir = Path(settings.DATA_DIR)
        log_dir = data_dir / "log"
        log_dir.mkdir(parents=True, exist_ok=True)

        children: list[Child] = []
        self.receiver: demo_hook.DemoReceiver | None = None  # the demo's webhook receiver
        previous = {
            sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGINT, signal.SIGTERM)
        }
        try:
            migrate_if_needed(self.say)
            logins = load_demo_logins(data_dir)
            # After the logins: the policy names demo-cashier, which must exist by then.
            catalog = child_env(shop_port, data_dir)["TOOLOPS_TOOLS_FILE"]
            self.say(demo_policy_apply(catalog=catalog))
            self.receiver = demo_hook.receiver_start(self.say)
            connections.close_all()  # the children own the database from here
            self._start(children, port, shop_port, data_dir, log_dir, options["reset_shop"])
            web_url, shop_url = f"http://{HOST}:{port}", f"http://{HOST}:{shop_port}"
            if not options["no_agent"]:
                self._run_agent(children, web_url, logins, shop_url)
            self._banner(web_url, shop_url, logins, children)
            self._watch(children)
        except Stop:
            self.say("\nStopping…")
        except ChildDied as died:
            self._report_death(died.child)
            raise CommandError(str(died), returncode=1) from None
        finally:
            for sig in previous:
                signal.signal(sig, signal.SIG_IGN)  # no second interrupt mid-cleanup
            stop_children(children)
            demo_hook.receiver_stop(self.receiver)
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        self.say("Stopped: shop, web, worker, reviewer and the webhook receiver are down.")

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        raise Stop(signum)

    def _start(
        self,
        children: list[Child],
        port: int,
        shop_port: int,
        data_dir: Path,
        log_dir: Path,
        reset_shop: bool,
    ) -> None:
        """Start the children one after the other, each seen ready before the next. Each
        goes into `children` as soon as it runs, before the wait: if it never gets ready,
        handle() still stops it."""
        env = child_env(shop_port, data_dir)
        env.setdefault("TOOLOPS_PUBLIC_URL", f"http://{HOST}:{port}")  # notifications' links
        self.say(f"Tool catalog: {env['TOOLOPS_TOOLS_FILE']}")
        self._start_shop(children, env, shop_port, data_dir, log_dir, reset_shop)
        self._start_web(children, env, port, log_dir)
        self._start_worker(children, env, log_dir)
        self._start_reviewer(children, env, log_dir)
        self.say("children: " + " ".join(f"{c.name}={c.proc.pid}" for c in children))

    def _start_shop(
        self,
        children: list[Child],
        env: dict[str, str],
        shop_port: int,
        data_dir: Path,
        log_dir: Path,
        reset_shop: bool,
    ) -> None:
        shop_db = data_dir / "demo-shop.sqlite3"
        shop = start_child(
            "shop",
            ["-m", "toolops.demo.shop", "--port", str(shop_port), "--db", str(shop_db)],
            env,
            log_dir,
        )
        children.append(shop)
        wait_until(shop, log_contains(shop, "shop listening on"), 20, "no 'listening' line")
        if reset_shop:
            httpx.post(f"http://{HOST}:{shop_port}/_shop/reset", timeout=10).raise_for_status()
            self.say("Demo shop reset: fresh stock, no orders.")
        self.say(f"✓ shop    http://{HOST}:{shop_port}  (log {log_dir / 'shop.log'})")

    def _start_web(
        self, children: list[Child], env: dict[str, str], port: int, log_dir: Path
    ) -> None:
        web = start_child(
            "web",
            # Forwarded headers are toolops.proxies' to judge (TOOLOPS_TRUSTED_PROXIES).
            [*UVICORN, "--host", HOST, "--port", str(port), "--no-proxy-headers"],
            env,
            log_dir,
        )
        children.append(web)
        schema = f"http://{HOST}:{port}/api/v1/schema/?format=json"
        wait_until(web, url_answers(schema), 60, f"{schema} did not answer 200")
        self.say(f"✓ web     http://{HOST}:{port}  (log {web.log_path})")

    def _start_worker(self, children: list[Child], env: dict[str, str], log_dir: Path) -> None:
        worker = start_child(
            "worker",
            [
                "-m",
                "celery",
                "-A",
                "toolops",
                "worker",
                "-B",
                "--loglevel",
                "warning",
                "--concurrency",
                "2",
                "--pool",
                "threads",
            ],
            env,
            log_dir,
        )
        children.append(worker)
        # The banner lists the queues once the app is configured; it must then stay up.
        wait_until(worker, log_contains(worker, "[queues]"), 60, "no start-up banner")
        stays_up(worker, 1.0)
        self.say(f"✓ worker  celery with beat, filesystem broker  (log {worker.log_path})")

    def _start_reviewer(self, children: list[Child], env: dict[str, str], log_dir: Path) -> None:
        # Approves, as `reviewer`, what the resilience scenarios' runs wait for (their
        # metadata says so); the approval scenarios' calls are left to a person.
        reviewer = start_child("reviewer", scripted_reviewer.ARGS, env, log_dir)
        children.append(reviewer)
        ready = log_contains(reviewer, scripted_reviewer.READY)
        wait_until(reviewer, ready, 60, "no 'ready' line")
        self.say(
            f"✓ reviewer  the scripted reviewer: approves runs marked "
            f'{{"{scripted_reviewer.METADATA_KEY}": "{scripted_reviewer.AUTO}"}}  '
            f"(log {reviewer.log_path})"
        )

    def _run_agent(
        self, children: list[Child], web_url: str, logins: Logins, shop_url: str
    ) -> None:
        self.say("\nScripted agent (toolops/demo/agent.py) against the real API:")
        results = run_demo(
            web_url, logins.token, shop_url, out=self.stdout, cashier_token=logins.cashier_token
        )
        for child in children:
            if not child.alive:
                raise ChildDied(child)
        if not all(r.ok for r in results):
            self.stderr.write("Some scenarios did not end as expected; see the lines above.")

    def _banner(self, web_url: str, shop_url: str, logins: Logins, children: list[Child]) -> None:
        self.say(f"\nConsole: {web_url}/console/ (what needs you now)  (admin: {web_url}/admin/)")
        self.say(
            f"Calls waiting for a person: {web_url}/console/approvals/ (log in as reviewer); "
            "their outcome is printed here (↳) when decided"
        )
        self.say(
            f"Metrics: {web_url}/console/metrics/ (per tool) and {web_url}/metrics "
            "(Prometheus); a run's page is its timeline. Spans go to a collector when "
            "OTEL_EXPORTER_OTLP_ENDPOINT is set for `make demo`"
        )
        self.say(
            f"Agent policy: {web_url}{POLICY_PAGE} (log in as operator): its rules, "
            "demo-cashier's spend against its daily limit, history and rollback (docs/policy.md)"
        )
        self.say(f"Logins (also in {logins.path}):")
        for name, (group, role) in DEMO_USERS.items():
            password = logins.passwords[name] or "(existing account, password unchanged)"
            self.say(f"  {name:<9} {password:<16} {group or 'superuser':<10} {role}")
        for line in agent_lines(web_url, shop_url, logins):
            self.say(line)
        backend = os.getenv("EMAIL_BACKEND")
        mail = f"through {backend}" if backend else f"as files in {settings.EMAIL_FILE_PATH}"
        self.say("\n".join(demo_hook.banner_lines(web_url, mail, self.receiver)))
        self.say("Logs: " + ", ".join(str(c.log_path) for c in children))
        self.say("Ctrl-C stops everything.")

    def _watch(self, children: list[Child]) -> None:
        while True:
            for child in children:
                if not child.alive:
                    raise ChildDied(child)
            time.sleep(0.5)

    def _report_death(self, child: Child) -> None:
        self.stderr.write(
            f"\n{child.name} exited unexpectedly ({child.exit_text}). "
            f"Last lines of {child.log_path}:"
        )
        for line in child.tail():
            self.stderr.write(f"  | {line}")
        self.stderr.write("Stopping the others…")
