"""compose.yaml, the Dockerfile and the configs under deploy/ agree with each other and
with the product (docs/deploy.md): every ToolOps service runs a real role of the image,
there is one beat, HAProxy balances exactly the web services on their port and checks
/readyz, every setting named is one ToolOps reads, the connection limits add up, no
secret is written down. Read offline: no container runtime is needed (none can pull
images on the machines the suite runs on; docs/deploy.md, "Not run in CI"). Each check
is also shown to catch its fault, in a broken copy."""

from __future__ import annotations

import configparser
import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent.parent
IMAGE = "toolops:latest"
# The longest a request may wait by design: a long-poll's `wait` and TOOLOPS_MCP_WAIT_S.
LONGEST_WAIT_S = 30
SUPERUSER_RESERVED = 3  # PostgreSQL's superuser_reserved_connections default
DEFAULT_POOL_MAX = 20  # toolops/envs.py


def source_text() -> str:
    parts = []
    for package in ("toolops", "compensations", "traces"):
        for path in sorted((ROOT / package).rglob("*.py")):
            if "migrations" not in path.parts:
                parts.append(path.read_text())
    return "\n".join(parts)


SOURCE = source_text()


# Names made in code: f"TOOLOPS_WEBHOOK_{_group.upper()}_URL" and the like.
NAME_FAMILIES = re.findall(r'f"([A-Z][A-Z0-9_]*_)\{[^}]*\}(_[A-Z0-9_]+)?"', SOURCE)


def read_by_toolops(name: str) -> bool:
    """A setting the product reads: named as a literal in its code, or made by it from a
    family (TOOLOPS_WEBHOOK_<GROUP>_URL, its group a literal too; a name ending in `_`
    is the family itself), or OpenTelemetry's own, as docs/traces.md lists them."""
    if f'"{name}"' in SOURCE:
        return True
    for prefix, suffix in NAME_FAMILIES:
        if name == prefix:
            return True
        middle = name.removeprefix(prefix).removesuffix(suffix or "")
        if name.startswith(prefix) and name.endswith(suffix) and f'"{middle.lower()}"' in SOURCE:
            return True
    return name.startswith("OTEL_") and name in (ROOT / "docs" / "traces.md").read_text()


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "compose.yaml").read_text())


@pytest.fixture(scope="module")
def default_cmd() -> list[str]:
    text = (ROOT / "Dockerfile").read_text()
    match = re.search(r"^CMD (\[.*?\])\s*$", text, re.M | re.S)
    assert match, "the Dockerfile has no CMD in exec form"
    return json.loads(match.group(1).replace("\\\n", ""))


@pytest.fixture(scope="module")
def haproxy() -> str:
    return (ROOT / "deploy" / "haproxy.cfg").read_text()


@pytest.fixture(scope="module")
def pgbouncer() -> configparser.SectionProxy:
    ini = configparser.ConfigParser(inline_comment_prefixes=(";",))
    ini.read_string((ROOT / "deploy" / "pgbouncer" / "pgbouncer.ini").read_text())
    return ini["pgbouncer"]


def toolops_services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {n: s for n, s in compose["services"].items() if s.get("image") == IMAGE}


def command_of(service: dict[str, Any], default_cmd: list[str]) -> list[str]:
    return service.get("command") or default_cmd


def seconds(text: str) -> float:
    match = re.fullmatch(r"(\d+)(s|m)?", str(text))
    assert match, f"not a duration: {text!r}"
    return int(match.group(1)) * (60 if match.group(2) == "m" else 1)


# The checks: each returns what is wrong, empty when all is well.


def role_problems(compose: dict[str, Any], default_cmd: list[str]) -> list[str]:
    problems = []
    roles = {"web": 0, "worker": 0, "beat": 0, "migrate": 0}
    for name, service in toolops_services(compose).items():
        cmd = command_of(service, default_cmd)
        if cmd[:2] == ["uvicorn", "toolops.asgi:application"]:
            roles["web"] += 1
        elif cmd[:3] == ["celery", "-A", "toolops"] and cmd[3:4] in (["worker"], ["beat"]):
            roles[cmd[3]] += 1
        elif cmd[:3] == ["python", "manage.py", "migrate"]:
            roles["migrate"] += 1
        else:
            problems.append(f"{name}: {' '.join(cmd)} is no role of the image")
    if roles["beat"] != 1:
        problems.append(f"{roles['beat']} beat services: there must be exactly one")
    if roles["migrate"] != 1 or not roles["web"] or not roles["worker"]:
        problems.append(f"roles present: {roles}")
    return problems


def balancer_problems(compose: dict[str, Any], default_cmd: list[str], cfg: str) -> list[str]:
    problems = []
    webs = {
        n
        for n, s in toolops_services(compose).items()
        if command_of(s, default_cmd)[0] == "uvicorn"
    }
    port = default_cmd[default_cmd.index("--port") + 1]
    servers = dict(re.findall(r"^\s*server (\S+) (\S+)", cfg, re.M))
    if set(servers) != webs:
        problems.append(f"HAProxy's servers {sorted(servers)} are not the web services")
    problems += [f"{s} is not on {n}:{port}" for n, s in servers.items() if s != f"{n}:{port}"]
    if "uri /readyz" not in cfg or "balance roundrobin" not in cfg:
        problems.append("HAProxy must balance round robin and check /readyz")
    for which in ("server", "client"):
        found = re.search(rf"timeout {which} (\S+)", cfg)
        if not found or seconds(found.group(1)) <= LONGEST_WAIT_S:
            problems.append(f"timeout {which} must be above the {LONGEST_WAIT_S} s long-poll")
    haproxy = compose["services"]["haproxy"]
    address = haproxy["networks"]["toolops"]["ipv4_address"]
    for name, service in toolops_services(compose).items():
        if service["environment"].get("TOOLOPS_TRUSTED_PROXIES") != address:
            problems.append(f"{name}: TOOLOPS_TRUSTED_PROXIES is not the balancer ({address})")
    return problems


def shutdown_problems(compose: dict[str, Any], default_cmd: list[str]) -> list[str]:
    problems = []
    if "--no-proxy-headers" not in default_cmd:
        problems.append("uvicorn must run with --no-proxy-headers (the trusted proxies decide)")
    graceful = float(default_cmd[default_cmd.index("--timeout-graceful-shutdown") + 1])
    if graceful <= LONGEST_WAIT_S:
        problems.append(f"the graceful shutdown ({graceful} s) is not above the longest wait")
    for name, service in toolops_services(compose).items():
        if command_of(service, default_cmd)[0] == "uvicorn":
            grace = seconds(service.get("stop_grace_period", "10s"))
            if grace <= graceful:
                problems.append(f"{name}: stop_grace_period {grace} s cuts uvicorn's {graceful} s")
    return problems


def environment_problems(compose: dict[str, Any]) -> list[str]:
    problems = []
    for name, service in toolops_services(compose).items():
        for var in service["environment"]:
            if not read_by_toolops(var):
                problems.append(f"{name}: {var} is no setting ToolOps reads")
    example = (ROOT / "deploy" / "env.example").read_text()
    compose_text = (ROOT / "compose.yaml").read_text()
    for var in re.findall(r"^#? ?([A-Z][A-Z0-9_]+)=", example, re.M):
        if not read_by_toolops(var) and f"${{{var}" not in compose_text:
            problems.append(f"env.example: {var} is read by nothing")
    return problems


def connection_problems(compose: dict[str, Any], ini: configparser.SectionProxy) -> list[str]:
    problems = []
    through, direct = 0, 0
    for name, service in toolops_services(compose).items():
        env = service["environment"]
        pool_max = int(env.get("TOOLOPS_DB_POOL_MAX", DEFAULT_POOL_MAX))
        if "@pgbouncer:" in env["DATABASE_URL"]:
            through += pool_max
            if env.get("TOOLOPS_DB_PREPARED") != "0":
                problems.append(f"{name}: through pgbouncer 1.18 needs TOOLOPS_DB_PREPARED=0")
            if env.get("TOOLOPS_DB_TRANSACTION_POOLING") != "1":
                problems.append(
                    f"{name}: through pgbouncer in transaction mode needs "
                    "TOOLOPS_DB_TRANSACTION_POOLING=1"
                )
        else:
            direct += pool_max
    if through > int(ini["max_client_conn"]):
        problems.append(f"pools through pgbouncer ({through}) exceed max_client_conn")
    server = int(ini["default_pool_size"]) + int(ini["reserve_pool_size"])
    if server > int(ini["max_db_connections"]):
        problems.append(f"pool + reserve ({server}) exceed max_db_connections")
    command = compose["services"]["postgres"]["command"]
    limit = int(next(c.split("=")[1] for c in command if c.startswith("max_connections=")))
    needed = int(ini["max_db_connections"]) + direct + SUPERUSER_RESERVED
    if needed > limit:
        problems.append(f"PostgreSQL needs {needed} connections, max_connections is {limit}")
    if ini["pool_mode"] != "transaction":
        problems.append("pgbouncer must pool in transaction mode")
    return problems


def secret_problems(compose: dict[str, Any]) -> list[str]:
    problems = []
    for name, service in compose["services"].items():
        for var, value in (service.get("environment") or {}).items():
            secret = any(w in var for w in ("SECRET", "PASSWORD", "KEYS", "TOKEN"))
            if secret and not str(value).startswith("${"):
                problems.append(f"{name}: {var} is written down, not taken from .env")
    for var in ("DJANGO_SECRET_KEY", "TOOLOPS_ARGS_KEYS", "POSTGRES_PASSWORD"):
        if f"${{{var}:?" not in (ROOT / "compose.yaml").read_text():
            problems.append(f"{var} must be required (${{{var}:?…}})")
    for ignore in (".gitignore", ".dockerignore"):
        if ".env" not in (ROOT / ignore).read_text().split():
            problems.append(f"{ignore} does not keep .env out")
    return problems


# The files as they are.


def test_every_toolops_service_runs_a_role_of_the_image_and_beat_runs_once(
    compose: dict[str, Any], default_cmd: list[str]
) -> None:
    assert role_problems(compose, default_cmd) == []


def test_haproxy_balances_the_web_services_and_only_it_is_trusted(
    compose: dict[str, Any], default_cmd: list[str], haproxy: str
) -> None:
    assert balancer_problems(compose, default_cmd, haproxy) == []


def test_a_stopping_web_process_has_time_to_finish_its_longest_request(
    compose: dict[str, Any], default_cmd: list[str]
) -> None:
    assert shutdown_problems(compose, default_cmd) == []


def test_every_setting_named_is_one_toolops_reads(compose: dict[str, Any]) -> None:
    assert environment_problems(compose) == []


def test_every_setting_named_in_the_deploy_guide_is_real() -> None:
    text = (ROOT / "docs" / "deploy.md").read_text()
    names = set(re.findall(r"\b((?:TOOLOPS|DJANGO|CELERY|OTEL)_[A-Z0-9_]+)", text))
    assert names, "docs/deploy.md names no setting"
    # TOOLOPS_WEBHOOK_<GROUP>_SECRET is found as its family, TOOLOPS_WEBHOOK_.
    invented = sorted(n for n in names if not read_by_toolops(n))
    assert invented == []


def test_the_connection_limits_add_up(
    compose: dict[str, Any], pgbouncer: configparser.SectionProxy
) -> None:
    assert connection_problems(compose, pgbouncer) == []


def test_no_secret_is_written_down(compose: dict[str, Any]) -> None:
    assert secret_problems(compose) == []


# Each check catches its fault.


def broken_copy(compose: dict[str, Any], *services: str) -> dict[str, Any]:
    """A copy of compose.yaml whose `services` are each their own (YAML's anchors make
    the web services, and the workers' environments, one object)."""
    broken = copy.deepcopy(compose)
    for name in services:
        broken["services"][name] = copy.deepcopy(broken["services"][name])
    return broken


def test_a_second_beat_is_caught(compose: dict[str, Any], default_cmd: list[str]) -> None:
    broken = copy.deepcopy(compose)
    broken["services"]["beat2"] = copy.deepcopy(broken["services"]["beat"])
    assert "2 beat services: there must be exactly one" in role_problems(broken, default_cmd)


def test_a_web_service_the_balancer_does_not_know_is_caught(
    compose: dict[str, Any], default_cmd: list[str], haproxy: str
) -> None:
    broken = copy.deepcopy(compose)
    broken["services"]["web4"] = copy.deepcopy(broken["services"]["web1"])
    problems = balancer_problems(broken, default_cmd, haproxy)
    assert any("are not the web services" in p for p in problems), problems
    short = haproxy.replace("timeout server 120s", "timeout server 30s")
    assert any("timeout server" in p for p in balancer_problems(compose, default_cmd, short))


def test_a_grace_period_shorter_than_uvicorns_is_caught(
    compose: dict[str, Any], default_cmd: list[str]
) -> None:
    broken = broken_copy(compose, "web2")
    broken["services"]["web2"]["stop_grace_period"] = "10s"
    assert any("web2: stop_grace_period" in p for p in shutdown_problems(broken, default_cmd))


def test_an_invented_setting_is_caught(compose: dict[str, Any]) -> None:
    broken = broken_copy(compose, "worker1")
    broken["services"]["worker1"]["environment"]["TOOLOPS_WORKER_POOL"] = "8"
    assert environment_problems(broken) == [
        "worker1: TOOLOPS_WORKER_POOL is no setting ToolOps reads"
    ]


def test_prepared_statements_through_pgbouncer_and_too_small_a_database_are_caught(
    compose: dict[str, Any], pgbouncer: configparser.SectionProxy
) -> None:
    broken = broken_copy(compose, "web3")
    broken["services"]["web3"]["environment"]["TOOLOPS_DB_PREPARED"] = "1"
    broken["services"]["postgres"]["command"] = ["postgres", "-c", "max_connections=60"]
    problems = connection_problems(broken, pgbouncer)
    assert "web3: through pgbouncer 1.18 needs TOOLOPS_DB_PREPARED=0" in problems
    assert any("max_connections is 60" in p for p in problems), problems


def test_a_secret_written_into_compose_is_caught(compose: dict[str, Any]) -> None:
    broken = broken_copy(compose, "web1")
    broken["services"]["web1"]["environment"]["DJANGO_SECRET_KEY"] = "hunter2"
    assert secret_problems(broken) == [
        "web1: DJANGO_SECRET_KEY is written down, not taken from .env"
    ]
