"""pgbouncer (Debian's /usr/sbin/pgbouncer) between ToolOps and PostgreSQL, in transaction
mode, its ini and userlist generated into the work directory, the process a child of
ours (foreground, its own process group: Ctrl-C stops it).

Authentication: the local PostgreSQL trusts the current user on 127.0.0.1
(.ci/postgres-loopback), and pgbouncer listens on 127.0.0.1 only: `auth_type = trust`
with the user named in the userlist (pgbouncer requires the name), no password written
anywhere; pgbouncer logs in to PostgreSQL as its client's user. Behind it, ToolOps runs
with TOOLOPS_DB_PREPARED=0 (Debian's pgbouncer is 1.18; prepared statements across pooled
server connections need 1.21)."""

from __future__ import annotations

import getpass
import os
import pwd
import re
import shutil
from contextlib import suppress
from pathlib import Path

from tests.chaos.stack import HOST, Proc, free_port, port_answers, wait_for

PGBOUNCER = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"

INI = """\
[databases]
{db_name} = host={upstream_host} port={upstream_port} dbname={db_name}

[pgbouncer]
listen_addr = {host}
listen_port = {port}
; no Unix socket: nothing but loopback TCP
unix_socket_dir =
auth_type = trust
auth_file = {userlist}
admin_users = {user}
stats_users = {user}
pool_mode = transaction
; Clients: every process's psycopg pool at its most (TOOLOPS_DB_POOL_MAX, 20 by default,
; times 3 web processes, 3 workers and beat, and the runner's own checks): 7 × 20 = 140,
; with room to spare.
max_client_conn = {max_client_conn}
; Server connections per database/user pair: what PostgreSQL actually holds. Transaction
; mode lends one for a transaction only, so a few serve all the clients; well under
; PostgreSQL's max_connections (100 by default), which other databases on this machine
; share.
default_pool_size = {pool_size}
reserve_pool_size = 5
reserve_pool_timeout = 2
; A client waits this long for a server connection before it is refused.
query_wait_timeout = 30
server_reset_query =
; psycopg sends none of these today; named so that a client that does is not refused.
ignore_startup_parameters = extra_float_digits,options
log_connections = 0
log_disconnections = 0
"""


class PgBouncer:
    """`PgBouncer(workdir, db_name, upstream_port=5432)`: pgbouncer in transaction mode on
    a free port of 127.0.0.1 (`.port`), serving the one database `db_name` of the
    PostgreSQL at 127.0.0.1:`upstream_port`. `.url` is a DATABASE_URL through it."""

    def __init__(
        self,
        workdir: Path,
        db_name: str,
        upstream_port: int = 5432,
        *,
        pool_size: int = 20,
        max_client_conn: int = 400,
        upstream_host: str = HOST,
    ) -> None:
        if not re.fullmatch(r"[a-z_][a-z0-9_]{0,62}", db_name):
            raise ValueError(f"db_name must be a plain lower-case name, got {db_name!r}")
        self.workdir = Path(workdir)
        self.db_name = db_name
        self.upstream = (upstream_host, int(upstream_port))
        self.pool_size, self.max_client_conn = pool_size, max_client_conn
        self.user = getpass.getuser()
        self.port = free_port()
        self.url = f"postgres://{HOST}:{self.port}/{db_name}"
        self.ini_path = self.workdir / "pgbouncer.ini"
        self.userlist_path = self.workdir / "pgbouncer-users.txt"
        self.proc: Proc | None = None

    def ini(self) -> str:
        return INI.format(
            db_name=self.db_name,
            upstream_host=self.upstream[0],
            upstream_port=self.upstream[1],
            host=HOST,
            port=self.port,
            userlist=self.userlist_path,
            user=self.user,
            max_client_conn=self.max_client_conn,
            pool_size=self.pool_size,
        )

    def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        # trust: the name must be listed; the password field is left empty.
        self.userlist_path.write_text(f'"{self.user}" ""\n')
        self.ini_path.write_text(self.ini())
        args = [PGBOUNCER, *self.as_user(), str(self.ini_path)]
        self.proc = Proc("pgbouncer", args, {}, self.workdir / "pgbouncer.log")
        self.proc.start()
        wait_for(lambda: port_answers(self.port) or not self.proc.alive, 20, "pgbouncer")
        if not self.proc.alive:
            raise RuntimeError(f"pgbouncer exited ({self.proc.exit_text}): see {self.proc.log}")

    @staticmethod
    def as_user() -> list[str]:
        """pgbouncer refuses to run as root: as root (a container, a CI machine), it
        drops to `nobody` once it has read its files (the workdir may stay private)."""
        if os.getuid() != 0:
            return []
        for name in ("nobody", "postgres"):
            with suppress(KeyError):
                pwd.getpwnam(name)
                return ["-u", name]
        raise RuntimeError("pgbouncer does not run as root, and there is no user nobody")

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.close()

    @property
    def pid(self) -> int | None:
        return None if self.proc is None or self.proc.proc is None else self.proc.proc.pid
