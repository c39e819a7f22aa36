"""The two databases of bench/flat.py: where PostgreSQL keeps them and how much room it
has, whether a loaded database can serve again as it is, and loading one afresh. A part
of the `Flat` bench (bench/flat.py), which holds the state these methods read: the
options, each side's URL and row count, the results."""

from __future__ import annotations

import shutil
import subprocess
import time
from typing import Any
from urllib.parse import urlsplit

from bench import flat_load
from bench.db import fresh_database
from bench.flat_options import NAMES
from bench.procs import PY, ROOT, run_checked


def database_url(base: str, name: str) -> str:
    parts = urlsplit(base)  # (urlunsplit drops the // of an empty host: postgres:///name)
    return f"{parts.scheme}://{parts.netloc}/{name}" + (f"?{parts.query}" if parts.query else "")


def connect(url: str) -> Any:
    import psycopg

    return psycopg.connect(url, autocommit=True)


class FlatDatabases:
    """The databases' part of `Flat`."""

    o: Any
    urls: dict[str, str]
    rows: dict[str, int]
    tokens: dict[str, str]
    results: dict[str, Any]

    def say(self, text: str = "") -> None:
        print(text, flush=True)

    def step(self, text: str) -> None:  # Flat's: the line with the time since the start
        raise NotImplementedError

    def env(self, side: str) -> dict[str, str]:  # Flat's: the servers' environment
        raise NotImplementedError

    def disk(self) -> int:
        with connect(database_url(self.o.database_url, "postgres")) as conn:
            try:
                where = conn.execute("SHOW data_directory").fetchone()[0]
            except Exception:  # only superusers may see it
                where = "/"
        try:
            usage = shutil.disk_usage(where)
        except OSError:
            where, usage = "/", shutil.disk_usage("/")
        self.say(
            f"disk: {usage.free / 1024**3:.1f} GiB free of {usage.total / 1024**3:.0f} GiB"
            " where PostgreSQL keeps its data"
        )
        self.results["disk_free_bytes"] = usage.free
        return usage.free

    def migrate(self, side: str) -> None:
        run_checked([PY, "manage.py", "migrate", "--noinput", "-v0"], self.env(side), "migrate")

    def exists(self, side: str) -> bool:
        with connect(database_url(self.o.database_url, "postgres")) as conn:
            return bool(
                conn.execute(
                    "SELECT 1 FROM pg_database WHERE datname = %s", [NAMES[side]]
                ).fetchone()
            )

    def kept(self, side: str) -> bool:
        """Whether the loaded database can serve again as it is (says why not)."""
        if self.o.reload or not self.exists(side):
            return False
        argv = [PY, "manage.py", "migrate", "--check", "--noinput", "-v0"]
        pending = subprocess.run(argv, cwd=ROOT, env=self.env(side), capture_output=True)
        with connect(self.urls[side]) as conn:
            loaded = flat_load.reusable(conn, self.rows[side], False, check_migrations=False)
        if pending.returncode != 0 and loaded is None:
            # New migrations run over the loaded rows, as they would in a deployment.
            self.step(f"{side} database: applying new migrations to its loaded rows")
            self.migrate(side)
            with connect(self.urls[side]) as conn:
                flat_load.mark_migrated(conn, NAMES[side])
            pending = subprocess.run(argv, cwd=ROOT, env=self.env(side), capture_output=True)
        with connect(self.urls[side]) as conn:
            why = flat_load.reusable(conn, self.rows[side], pending.returncode != 0)
        if why is not None:
            self.step(f"{side} database: {why}; loading it again")
        return why is None

    def prepare(self, side: str) -> None:
        rows, name = self.rows[side], NAMES[side]
        info: dict[str, Any] = {"name": name, "rows": rows}
        if side == "big" and self.kept(side):
            with connect(self.urls[side]) as conn:
                found = flat_load.marker(conn) or {}
            info.update(reused=True, load_s=found.get("load_s"), loaded_when=found.get("when"))
            self.step(
                f"{side} database {name}: kept, {rows:,} rows loaded {found.get('when')} in "
                f"{found.get('load_s', 0):.0f} s (--reload to load it again)"
            )
        else:
            if side == "big":
                flat_load.check_space(self.results["disk_free_bytes"], rows)
            self.step(f"{side} database {name}: fresh, migrate, load {rows:,} rows …")
            fresh_database(self.urls[side])
            self.migrate(side)
            started = time.monotonic()
            with connect(self.urls[side]) as conn:
                detail = flat_load.load(conn, rows, self.say)
                seconds = time.monotonic() - started
                flat_load.mark_loaded(conn, name, rows, seconds)
            info.update(reused=False, load_s=seconds, load=detail)
            self.step(
                f"{side} database: loaded in {seconds:.0f} s (inserts {detail['insert_s']:.0f} s,"
                f" VACUUM ANALYZE {detail['vacuum_analyze_s']:.0f} s, CHECKPOINT "
                f"{detail['checkpoint_s']:.0f} s)"
            )
        with connect(self.urls[side]) as conn:
            info["size_bytes"] = flat_load.database_size(conn)
            info["counts"] = flat_load.counts(conn)
            info["tables"] = flat_load.table_sizes(conn)
        c = info["counts"]
        self.say(
            f"  {name}: {info['size_bytes'] / 1024**2:,.0f} MB (pg_database_size); "
            f"{c['toolops_idempotencyrecord']:,} idempotency records "
            f"({c['expired_records']:,} expired), {c['toolops_toolcall']:,} calls, "
            f"{c['toolops_attempt']:,} attempts, {c['toolops_run']:,} runs"
        )
        with connect(self.urls[side]) as conn:
            self.tokens[side] = flat_load.agent_token(conn)
        self.results["databases"][side] = info
