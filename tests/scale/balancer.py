"""HAProxy (Debian's /usr/sbin/haproxy) in front of the web processes: round robin, an
HTTP health check on each server, its configuration generated into the work directory
and the process a child of ours (foreground, its own process group: Ctrl-C stops it).

Retries, chosen for what is safe to send twice:
- A request that never reached a server (connection refused or reset while connecting:
  a web process killed or starting) is sent to another server (`retry-on conn-failure`,
  `option redispatch`), whatever its method: nothing ran.
- A request that reached a server which closed without a byte of answer
  (`empty-response`: it died mid-request) is sent again only when its method is GET or
  HEAD. A POST may have run: the executor's idempotency keys would make a replay of
  `POST /api/v1/calls` safe, but not every POST carries one (an approval's decision, an
  MCP message, a console form), so the balancer leaves that retry to the client, which
  knows its key — the lost answer the chaos agents retry themselves.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
from pathlib import Path
from typing import Any

from tests.chaos.stack import HOST, Proc, free_port, port_answers, wait_for

HAPROXY = shutil.which("haproxy") or "/usr/sbin/haproxy"
# Longer than any answer a server may take: a long-poll waits at most 30 s (`wait` ≤ 30
# in toolops/api/views.py, TOOLOPS_MCP_WAIT_S ≤ 30 in toolops/conf/agents.py), a call's
# own work comes on top (downstream attempts and their backoff).
SERVER_TIMEOUT_S = 120
# An open WebSocket (the console's live pages) idles longer than that: a tunnel's timeout.
TUNNEL_TIMEOUT_S = 3600

CONFIG = """\
global
    maxconn 4000
    stats socket {socket} mode 600 level admin
    log stderr format raw local0 notice

defaults
    mode http
    log global
    option dontlognull
    option forwardfor
    timeout connect 2s
    timeout client {server_timeout}s
    timeout server {server_timeout}s
    timeout http-request 10s
    timeout http-keep-alive 10s
    timeout tunnel {tunnel_timeout}s
    timeout client-fin 5s
    retries 3
    option redispatch
    retry-on conn-failure empty-response

frontend toolops
    bind {host}:{port}
    default_backend webs

backend webs
    balance roundrobin
    # A request that may have run (not GET/HEAD) is retried on connection failures only.
    http-request disable-l7-retry unless METH_GET || METH_HEAD
    option httpchk
    http-check send meth GET uri {check_path} ver HTTP/1.1 hdr Host {host}
    http-check expect status 200
    default-server check inter 1s fall 2 rise 2
{servers}
"""


class Balancer:
    """`Balancer(workdir, backends=[(host, port), ...], check_path="/readyz")`: HAProxy
    on a free port of 127.0.0.1 (`.url`), its servers named web1, web2, … in the order
    given. `.start()` waits until it listens (not until the servers are UP: see
    `wait_up`); `.stats()` is each server's state."""

    def __init__(
        self, workdir: Path, backends: list[tuple[str, int]], check_path: str = "/readyz"
    ) -> None:
        if not backends:
            raise ValueError("Balancer needs at least one backend (host, port)")
        if not check_path.startswith("/") or any(c.isspace() for c in check_path):
            raise ValueError(f"check_path must be a path starting with /, got {check_path!r}")
        self.workdir = Path(workdir)
        self.backends = [(str(h), int(p)) for h, p in backends]
        self.check_path = check_path
        self.port = free_port()
        self.url = f"http://{HOST}:{self.port}"
        self.socket_path = self.workdir / "haproxy.sock"
        self.config_path = self.workdir / "haproxy.cfg"
        self.names = [f"web{i + 1}" for i in range(len(self.backends))]
        self.proc: Proc | None = None

    def config(self) -> str:
        servers = "\n".join(
            f"    server {name} {host}:{port}"
            for name, (host, port) in zip(self.names, self.backends, strict=True)
        )
        return CONFIG.format(
            socket=self.socket_path,
            host=HOST,
            port=self.port,
            check_path=self.check_path,
            server_timeout=SERVER_TIMEOUT_S,
            tunnel_timeout=TUNNEL_TIMEOUT_S,
            servers=servers,
        )

    def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(self.config())
        check = subprocess.run(
            [HAPROXY, "-c", "-q", "-f", str(self.config_path)], capture_output=True, text=True
        )
        if check.returncode != 0:
            raise RuntimeError(f"haproxy refuses {self.config_path}: {check.stdout}{check.stderr}")
        # -db: foreground, no daemon; the process is ours to stop.
        args = [HAPROXY, "-db", "-f", str(self.config_path)]
        self.proc = Proc("haproxy", args, {}, self.workdir / "haproxy.log")
        self.proc.start()
        wait_for(lambda: port_answers(self.port) or not self.proc.alive, 20, "haproxy")
        if not self.proc.alive:
            raise RuntimeError(f"haproxy exited ({self.proc.exit_text}): see {self.proc.log}")

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.close()

    @property
    def pid(self) -> int | None:
        return None if self.proc is None or self.proc.proc is None else self.proc.proc.pid

    def command(self, line: str) -> str:
        """One command on HAProxy's stats socket (`show stat`, `disable server webs/web1`)."""
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(5)
            s.connect(str(self.socket_path))
            s.sendall(line.encode() + b"\n")
            chunks = []
            while chunk := s.recv(65536):
                chunks.append(chunk)
        return b"".join(chunks).decode()

    def stats(self) -> dict[str, dict[str, Any]]:
        """Each server's state, by name: {"web1": {"status": "UP", "address":
        "127.0.0.1:8001", "sessions": 12, "responses": {"2xx": 10, …}, "check": "L7OK"},
        …}; `status` is HAProxy's ("UP", "DOWN", "UP 1/2" while rising, "MAINT")."""
        lines = self.command("show stat").splitlines()
        header = lines[0].lstrip("# ").split(",")
        found: dict[str, dict[str, Any]] = {}
        for line in lines[1:]:
            row = dict(zip(header, line.split(","), strict=False))
            if row.get("pxname") != "webs" or row.get("svname") not in self.names:
                continue
            found[row["svname"]] = {
                "status": row["status"],
                "address": row.get("addr", ""),
                "sessions": int(row.get("stot") or 0),
                "responses": {
                    k[5:]: int(row.get(k) or 0)
                    for k in ("hrsp_1xx", "hrsp_2xx", "hrsp_3xx", "hrsp_4xx", "hrsp_5xx")
                },
                "check": row.get("check_status", ""),
            }
        return found

    def states(self) -> dict[str, str]:
        """{"web1": "UP", "web2": "DOWN", …}."""
        return {name: s["status"] for name, s in self.stats().items()}

    def wait_up(self, timeout: float = 60, names: list[str] | None = None) -> None:
        """Until every server named (all by default) passes its health check."""
        wanted = names or self.names

        def up() -> bool:
            states = self.states()
            return all(states.get(n) == "UP" for n in wanted)

        wait_for(up, timeout, f"haproxy servers {', '.join(wanted)} UP", every=0.5)
