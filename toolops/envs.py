"""Reading ToolOps' settings from the environment: small typed helpers that refuse a bad
value at start-up with a message naming the setting (ImproperlyConfigured), and the few
settings that need more than a line (keys made once per data directory, the trusted
proxies, the database). toolops/settings.py stays a list of what is set."""

from __future__ import annotations

import base64
import binascii
import ipaddress
import os
import secrets
from pathlib import Path
from typing import overload

import dj_database_url
from django.core.exceptions import ImproperlyConfigured


def envbool(name: str, default: str) -> bool:
    value = os.getenv(name, default).strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off", ""):
        return False
    raise ImproperlyConfigured(f"{name} must be a boolean (1/0, true/false), got {value!r}")


def envfloat(name: str, default: float) -> float:
    raw = os.getenv(name)
    if raw is None or raw == "":
        return default
    try:
        return float(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a number, got {raw!r}") from None


@overload
def envint(name: str, default: int) -> int: ...
@overload
def envint(name: str, default: None) -> int | None: ...
def envint(name: str, default: int | None) -> int | None:
    raw = os.getenv(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a whole number, got {raw!r}") from None


def envint_within(name: str, low: int, high: int) -> int | None:
    """A whole number from `low` to `high`, or None when the variable is unset."""
    value = envint(name, None)
    if value is not None and not low <= value <= high:
        raise ImproperlyConfigured(f"{name} must be from {low:,} to {high:,}, got {value:,}")
    return value


def fernet_keys(raw: str, source: str) -> list[str]:
    """Comma- or newline-separated Fernet keys (32 url-safe base64-encoded bytes each, as
    `Fernet.generate_key()` makes them); the first encrypts, all decrypt. A bad key is
    named by its position, never echoed: it is a secret."""
    keys = [k.strip() for k in raw.replace("\n", ",").split(",") if k.strip()]
    if not keys:
        raise ImproperlyConfigured(f"{source} holds no key")
    for number, key in enumerate(keys, start=1):
        try:
            ok = len(base64.urlsafe_b64decode(key.encode("ascii"))) == 32
        except (binascii.Error, UnicodeEncodeError, ValueError):
            ok = False
        if not ok:
            raise ImproperlyConfigured(
                f"{source}: key {number} of {len(keys)} is not a Fernet key (32 url-safe "
                "base64-encoded bytes, as made by "
                "`python -c 'from cryptography.fernet import Fernet; "
                "print(Fernet.generate_key().decode())'`)"
            )
    return keys


def private_write(path: Path, text: str) -> None:
    """Write a secret to a new file that is never readable by others, not even for the
    moment between a write and a chmod. FileExistsError if `path` is there already."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as file:
        file.write(text)


def kept_secret(path: Path, make: str) -> str:
    """The secret kept in `path`, written there first as `make` if the file is missing.
    Written aside and linked into place: two processes starting at once (a web server and
    its worker, two test workers) agree on one secret (the loser's link fails), and nobody
    reads a half-written or empty file."""
    if not path.exists():
        fresh = path.with_name(f".{path.name}.{os.getpid()}")
        fresh.unlink(missing_ok=True)  # left by a process that died here with our pid
        private_write(fresh, make + "\n")
        try:
            os.link(fresh, path)
        except FileExistsError:
            pass
        finally:
            fresh.unlink()
    return path.read_text()


def args_keys(data_dir: Path) -> list[str]:
    """TOOLOPS_ARGS_KEYS, or one key made once and kept in the data directory (like the
    secret key), so that every process on the machine seals and opens alike."""
    raw = os.getenv("TOOLOPS_ARGS_KEYS", "")
    if raw.strip():
        return fernet_keys(raw, "TOOLOPS_ARGS_KEYS")
    path = data_dir / "args_keys"
    made = base64.urlsafe_b64encode(secrets.token_bytes(32)).decode()
    return fernet_keys(kept_secret(path, made), str(path))


def trusted_proxies(raw: str) -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    """TOOLOPS_TRUSTED_PROXIES: comma-separated addresses or CIDR networks."""
    networks = []
    for item in (part.strip() for part in raw.split(",")):
        if not item:
            continue
        try:
            networks.append(ipaddress.ip_network(item, strict=False))
        except ValueError:
            raise ImproperlyConfigured(
                f"TOOLOPS_TRUSTED_PROXIES: {item!r} is not an IP address or network "
                "(e.g. 10.0.0.5, 10.0.0.0/8, fd00::/8)"
            ) from None
    return networks


def database(data_dir: Path) -> dj_database_url.DBConfig:
    """DATABASE_URL (default: SQLite in the data directory), with what each engine needs
    here."""
    url = os.getenv("DATABASE_URL") or f"sqlite:///{data_dir / 'toolops.sqlite3'}"
    try:
        db = dj_database_url.parse(url)
    except ValueError as exc:
        raise ImproperlyConfigured(f"DATABASE_URL is not a database URL: {exc}") from None
    if db["ENGINE"] == "django.db.backends.postgresql":
        # Under ASGI, persistent connections leak one per request (DESIGN.md pitfalls):
        # a psycopg pool per process instead, with CONN_MAX_AGE at 0 as the pool requires.
        db["CONN_MAX_AGE"] = 0
        db["OPTIONS"] = {**db.get("OPTIONS", {}), **postgresql_options()}
        # Behind a pooler in transaction mode (pgbouncer's pool_mode = transaction), a
        # server-side cursor (QuerySet.iterator()) is declared on one server connection
        # and may be fetched on another: Django's documentation says to turn them off.
        db["DISABLE_SERVER_SIDE_CURSORS"] = transaction_pooling()
    elif db["ENGINE"] == "django.db.backends.sqlite3":
        # One machine, several processes (web, worker, beat): WAL lets readers run beside
        # the writer, IMMEDIATE takes the write lock up front instead of failing to upgrade.
        db["OPTIONS"] = {
            "timeout": 20,
            "transaction_mode": "IMMEDIATE",
            "init_command": (
                "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA busy_timeout=20000;"
            ),
        }
    return db


def transaction_pooling() -> bool:
    """TOOLOPS_DB_TRANSACTION_POOLING: DATABASE_URL names a pooler in transaction mode."""
    return envbool("TOOLOPS_DB_TRANSACTION_POOLING", "0")


def postgresql_options() -> dict[str, object]:
    """OPTIONS for PostgreSQL: prepared statements, timeouts, the connection pool."""
    from toolops.dbconn import DeadlineConnection  # noqa: PLC0415 - psycopg: PostgreSQL only

    # Off by default behind a transaction pooler: pgbouncer keeps prepared statements
    # apart per server connection only from 1.21 on (with max_prepared_statements set).
    prepared = envbool("TOOLOPS_DB_PREPARED", "0" if transaction_pooling() else "1")

    pool_timeout = envfloat("TOOLOPS_DB_POOL_TIMEOUT_S", 5.0)
    if not 0 < pool_timeout < 10**6:
        raise ImproperlyConfigured(
            f"TOOLOPS_DB_POOL_TIMEOUT_S must be a positive number of seconds, got "
            f"{os.getenv('TOOLOPS_DB_POOL_TIMEOUT_S')!r}"
        )
    return {
        # Parameters bound by the server, and statements prepared after their 5th use
        # on a connection: the executor's few hot statements have the same text every
        # time, and planning them again was most of the database's work per call.
        # (Behind pgbouncer, it needs 1.21 or later.)
        "server_side_binding": prepared,
        "prepare_threshold": 5 if prepared else None,
        # A database that is down or unreachable is noticed in seconds, never waited
        # for: connecting gives up after 3 s; a connection whose packets go
        # unacknowledged for 5 s, or idle and silent to keepalives for ~20 s, is
        # ended; in web processes a statement unanswered for
        # TOOLOPS_DB_ANSWER_TIMEOUT_S ends too (toolops/dbconn.py). A broken
        # connection is closed, so the pool discards it rather than lending it again.
        "connect_timeout": 3,
        "keepalives": 1,
        "keepalives_idle": 10,
        "keepalives_interval": 3,
        "keepalives_count": 3,
        "tcp_user_timeout": 5000,
        "pool": {
            "min_size": envint("TOOLOPS_DB_POOL_MIN", 2),
            "max_size": envint("TOOLOPS_DB_POOL_MAX", 20),
            "connection_class": DeadlineConnection,
            # A request waits this long for a connection, then is answered 503.
            "timeout": pool_timeout,
            # Reconnecting backs off (1, 2, 4 s…) for at most this long; then the next
            # request starts again from 1 s, so an outage's end is seen in seconds
            # however long it lasted.
            "reconnect_timeout": 10.0,
        },
    }
