"""The demo's logins file (`var/demo-logins.txt`, mode 0600): where the demo's generated
passwords and its agent's token are kept between runs, so that the token is printed once,
when it is made, and read from here afterwards. Django-free: the scripted agent, a plain
HTTP client, reads its token from here when given none."""

from __future__ import annotations

import os
from pathlib import Path

LOGINS_FILE = "demo-logins.txt"
AGENT_NAME = "demo-agent"
AGENT_KEY = f"agent:{AGENT_NAME}"
# The demo policy's limited agent (toolops/demo/policy.toml): small charges without a
# reviewer, at most 500.00 a day. An agent of its own, so that its daily limit never
# touches demo-agent's scenarios, however often the demo runs in a day.
CASHIER_NAME = "demo-cashier"
CASHIER_KEY = f"agent:{CASHIER_NAME}"


def default_path() -> Path:
    """The file in the data directory the settings use (TOOLOPS_DATA_DIR, else `var/`)."""
    return Path(os.environ.get("TOOLOPS_DATA_DIR") or "var") / LOGINS_FILE


def read_secrets(path: Path) -> dict[str, str]:
    """`name secret` lines; # comments. Missing file: nothing yet."""
    found: dict[str, str] = {}
    if not path.exists():
        return found
    for line in path.read_text().splitlines():
        parts = line.split()
        if len(parts) == 2 and not line.startswith("#"):
            found[parts[0]] = parts[1]
    return found


def write_secrets(path: Path, values: dict[str, str]) -> None:
    lines = [
        "# ToolOps demo logins, generated on the first `manage.py demo`. Delete this file",
        f"# to get new ones. `{AGENT_KEY}` and `{CASHIER_KEY}` are those demo agents'",
        "# API tokens.",
        *(f"{name} {secret}" for name, secret in values.items()),
    ]
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write("\n".join(lines) + "\n")
    path.chmod(0o600)


def agent_token(path: Path, key: str = AGENT_KEY) -> str:
    """The demo agent's token (or, with `key`, another demo agent's) from the file;
    empty when there is none yet."""
    return read_secrets(path).get(key, "")


def token_command(path: Path) -> str:
    """A shell command that prints the token, for people who need it by hand."""
    return f"awk '$1==\"{AGENT_KEY}\"{{print $2}}' {path}"
