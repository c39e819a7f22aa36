"""PostgreSQL connections that give up on a database that does not answer.

libpq waits for an answer as long as it takes. TCP keepalives and `tcp_user_timeout`
(toolops/envs.py) end a connection whose packets are lost, but not one to a server that
takes the bytes and never answers (a frozen server or host, a proxy or balancer stuck in
between): a web request would then hold its thread until the database came back. In web
processes (toolops/asgi.py sets the deadline) every wait on the database — a statement,
a commit — ends after TOOLOPS_DB_ANSWER_TIMEOUT_S with an OperationalError, which the API
answers as 503 with Retry-After. The connection is closed on the spot, mid-exchange, so
the pool discards it rather than lending it again. It costs nothing per statement: the
deadline is the timeout of the poll psycopg makes anyway. Workers, beat and management
commands (migrations, retention's long deletes) keep no deadline.

Every connection also turns PostgreSQL's JIT off: it compiles a query whose estimated
cost passes `jit_above_cost`, and the console's estimates grow with the tables — at 10
million calls the approvals queue's query spent 730 ms compiling for a run of under 1 ms
(bench/flat.py). ToolOps runs short statements only. A session SET, not the `options`
startup parameter, which pgbouncer (1.18) refuses; behind it in transaction mode the SET
stays with whichever server connection it ran on (harmless either way).
"""

from __future__ import annotations

import functools
from typing import Any

import psycopg
from django.db import connection, transaction
from psycopg import errors

# psycopg's own wake-up interval while it waits (it checks for Ctrl-C in between).
_WAIT_INTERVAL = 0.1
_answer_timeout_s: float | None = None


def set_answer_timeout(seconds: float | None) -> None:
    """Give up on an answer after `seconds` (None or 0: wait as long as it takes)."""
    global _answer_timeout_s
    _answer_timeout_s = seconds or None


class DeadlineConnection(psycopg.Connection):
    """The pool's connection class (OPTIONS["pool"]["connection_class"])."""

    @classmethod
    def connect(cls, conninfo: str = "", **kwargs: Any) -> Any:
        conn = super().connect(conninfo, **kwargs)
        autocommit = conn.autocommit
        conn.autocommit = True
        conn.execute("SET jit = off")
        conn.autocommit = autocommit
        return conn

    def wait(self, gen: Any, interval: float = _WAIT_INTERVAL, timeout: float | None = None) -> Any:
        limit = timeout if timeout is not None else _answer_timeout_s
        try:
            return super().wait(gen, interval, limit)
        except errors._WaitTimeout:
            if timeout is not None:  # the caller's own timeout (a notifies wait): theirs
                raise
            # Half an exchange is left on the wire: the connection is never used again.
            self.pgconn.finish()
            raise psycopg.OperationalError(
                f"the database did not answer within {limit:g} s"
            ) from None


def custom_plans(view: Any) -> Any:
    """A view whose queries are planned for their values (PostgreSQL): its own
    transaction, with `plan_cache_mode = force_custom_plan` for that transaction only.

    psycopg prepares a statement on its connection after its 5th run (server-side
    binding, TOOLOPS_DB_PREPARED), and PostgreSQL may then run a prepared statement on a
    generic plan, made without the values. For the console's searches that is the wrong
    plan: `run_id LIKE $1` cannot use the pattern-order index when the pattern is unknown,
    so the generic plan reads every run (at 10 million calls a search took 58 ms
    prepared, 14 ms planned for its values; bench/flat.py). `SET LOCAL` ends with the
    transaction, so the executor's statements keep their generic plans, and behind
    pgbouncer in transaction mode it stays with this transaction's server connection."""

    @functools.wraps(view)
    def planned(*args: Any, **kwargs: Any) -> Any:
        if connection.vendor != "postgresql":
            return view(*args, **kwargs)
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute("SET LOCAL plan_cache_mode = force_custom_plan")
            return view(*args, **kwargs)

    return planned
