"""`manage.py demo`'s options, without starting it: a busy or bad port is refused by name
and option before anything starts, the shop's port follows --port, `make demo PORT=…`
passes it, and the agent's token is printed whole only by the run that makes it."""

from __future__ import annotations

import io
import os
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import override_settings

from toolops.demo import agent
from toolops.demo.accounts import Logins
from toolops.demo.logins import AGENT_KEY, write_secrets
from toolops.demo.processes import port_is_free
from toolops.management.commands.demo import agent_lines

from .launcher import ROOT, free_port

TOKEN = "tok_" + "x" * 43


@pytest.fixture
def listening() -> Iterator[socket.socket]:
    """A port something listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock


def refused(tmp_path: Path, *args: str) -> str:
    """The command's refusal; nothing may have been started or written."""
    with override_settings(DATA_DIR=tmp_path), pytest.raises(CommandError) as error:
        call_command("demo", *args, stdout=io.StringIO(), stderr=io.StringIO())
    assert not (tmp_path / "log").exists(), "the demo started something before refusing"
    return str(error.value)


def test_a_busy_port_is_refused_naming_it_and_the_option(
    tmp_path: Path, listening: socket.socket
) -> None:
    port = listening.getsockname()[1]

    message = refused(tmp_path, "--port", str(port))

    assert message.startswith(f"port {port} (--port) is busy on 127.0.0.1: "), message
    # It offers a port that is free now, for the command and for make.
    free = int(message.split("--port ")[-1].split()[0])
    assert free != port and port_is_free(free), message
    assert f"(make demo PORT={free})" in message, message


def test_a_busy_shop_port_is_refused_naming_its_option(
    tmp_path: Path, listening: socket.socket
) -> None:
    shop_port = listening.getsockname()[1]

    message = refused(tmp_path, "--port", str(free_port()), "--shop-port", str(shop_port))

    assert message.startswith(f"port {shop_port} (--shop-port) is busy"), message
    assert "make demo SHOP_PORT=" in message, message


def test_the_shop_follows_the_web_port_and_is_refused_when_that_is_busy(
    tmp_path: Path, listening: socket.socket
) -> None:
    # Nothing given for the shop: it takes --port + 1000, and says so when that is busy.
    shop_port = listening.getsockname()[1]
    if not port_is_free(shop_port - 1000):
        pytest.skip(f"port {shop_port - 1000} is in use here")

    message = refused(tmp_path, "--port", str(shop_port - 1000))

    assert message.startswith(f"port {shop_port} (--shop-port) is busy"), message


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--port", "0"], "--port 0 is not a TCP port (1 to 65535)"),
        (["--port", "65000"], "--port 65000 puts the demo shop on port 66000, past 65535"),
        (["--port", "8123", "--shop-port", "8123"], "--port and --shop-port are both 8123"),
    ],
)
def test_a_bad_port_is_refused_with_what_is_wrong(
    tmp_path: Path, args: list[str], says: str
) -> None:
    assert says in refused(tmp_path, *args)


def test_make_demo_passes_its_port() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("PORT", "SHOP_PORT")}

    def planned(*variables: str) -> str:
        return subprocess.run(
            ["make", "-n", "-s", "demo", *variables],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout

    assert "manage.py demo --port 8001\n" in planned("PORT=8001")
    assert "manage.py demo --port 8000\n" in planned()
    assert "manage.py demo --port 8000 --shop-port 9100\n" in planned("SHOP_PORT=9100")


def banner(tmp_path: Path, *, new: bool) -> str:
    logins = Logins({"admin": "pw"}, TOKEN, new, tmp_path / "demo-logins.txt")
    return "\n".join(agent_lines("http://127.0.0.1:8001", "http://127.0.0.1:9001", logins))


def test_a_new_token_is_printed_whole_once(tmp_path: Path) -> None:
    text = banner(tmp_path, new=True)

    assert text.count(TOKEN) == 1, text
    assert f"Agent demo-agent: token {TOKEN}  (shown this once; kept in {tmp_path}" in text
    assert "Bearer <the demo-agent token>" in text


def test_a_kept_token_is_not_printed_again_but_where_to_find_it_is(tmp_path: Path) -> None:
    text = banner(tmp_path, new=False)

    assert TOKEN not in text, text
    assert f"token {TOKEN[:9]}…" in text
    path = tmp_path / "demo-logins.txt"
    printer = text.split("print it with: ")[1].split(")")[0]
    write_secrets(path, {"admin": "pw", AGENT_KEY: TOKEN})
    shown = subprocess.run(["sh", "-c", printer], capture_output=True, text=True, check=True)
    assert shown.stdout.strip() == TOKEN


def test_the_scripted_agent_reads_its_token_from_the_logins_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("TOOLOPS_AGENT_TOKEN", raising=False)
    path = tmp_path / "demo-logins.txt"
    write_secrets(path, {"admin": "pw", AGENT_KEY: TOKEN})
    assert agent._parse_args(["--logins", str(path)]).token == TOKEN

    with pytest.raises(SystemExit):
        agent._parse_args(["--logins", str(tmp_path / "none.txt")])
    assert f"none at {tmp_path / 'none.txt'}" in capsys.readouterr().err
