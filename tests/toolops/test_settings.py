"""Settings from the environment, and the deploy check."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

from cryptography.fernet import Fernet

ROOT = Path(__file__).resolve().parents[2]


def run_manage(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    # What a deployment would have: none of the test run's own switches.
    dropped = ("TOOLOPS_TOOLS", "DJANGO_ALLOW_ASYNC_UNSAFE")
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(dropped)}
    full_env.update(env)
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def production_env(tmp_path: Path) -> dict[str, str]:
    """The production settings the README lists, with made-up values."""
    return {
        "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
        "DJANGO_DEBUG": "0",
        "DJANGO_ALLOWED_HOSTS": "toolops.example.com",
        "TOOLOPS_HTTPS": "1",
        "TOOLOPS_TRUSTED_PROXIES": "10.0.0.0/8",
        "TOOLOPS_METRICS_TOKEN": secrets.token_urlsafe(32),
        "TOOLOPS_ARGS_KEYS": Fernet.generate_key().decode(),
        "DATABASE_URL": "postgres://toolops@db.example.com/toolops",
        "REDIS_URL": "redis://redis.example.com:6379/0",
        "TOOLOPS_DATA_DIR": str(tmp_path),
    }


def test_it_passes_the_deploy_check_with_the_readmes_production_settings(
    tmp_path: Path,
) -> None:
    result = run_manage("check", "--deploy", "--fail-level", "WARNING", **production_env(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout, result.stdout


def test_it_warns_of_a_host_made_args_key_on_postgresql_only(tmp_path: Path) -> None:
    env = {"TOOLOPS_DATA_DIR": str(tmp_path), "TOOLOPS_ARGS_KEYS": ""}

    shared = run_manage("check", DATABASE_URL="postgres:///toolops", **env)
    alone = run_manage("check", DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}", **env)
    keyed = run_manage(
        "check",
        DATABASE_URL="postgres:///toolops",
        **{**env, "TOOLOPS_ARGS_KEYS": Fernet.generate_key().decode()},
    )

    # Several hosts are likely on PostgreSQL, and each would make a key of its own.
    assert "toolops.W003" in shared.stdout + shared.stderr
    assert "TOOLOPS_ARGS_KEYS is not set" in shared.stdout + shared.stderr
    assert "toolops.W003" not in alone.stdout + alone.stderr
    assert "toolops.W003" not in keyed.stdout + keyed.stderr


def test_it_warns_in_the_deploy_check_without_https(tmp_path: Path) -> None:
    result = run_manage(
        "check",
        "--deploy",
        "--fail-level",
        "WARNING",
        DJANGO_SECRET_KEY=secrets.token_urlsafe(50),
        TOOLOPS_DATA_DIR=str(tmp_path),
    )
    assert result.returncode != 0
    assert "TOOLOPS_HTTPS" in result.stdout + result.stderr


def test_it_names_a_bad_setting(tmp_path: Path) -> None:
    result = run_manage("check", TOOLOPS_CLAIM_LEASE_S="soon", TOOLOPS_DATA_DIR=str(tmp_path))
    assert result.returncode != 0
    assert "TOOLOPS_CLAIM_LEASE_S must be a number" in result.stderr


def test_it_names_a_bad_database_timeout(tmp_path: Path) -> None:
    postgres = {"DATABASE_URL": "postgres://toolops@db.example.com/toolops"}
    for name, value, message in [
        ("TOOLOPS_DB_POOL_TIMEOUT_S", "0", "must be a positive number of seconds, got '0'"),
        ("TOOLOPS_DB_ANSWER_TIMEOUT_S", "-1", "must be 0 (no deadline) or a number of seconds"),
    ]:
        result = run_manage("check", TOOLOPS_DATA_DIR=str(tmp_path), **postgres, **{name: value})
        assert result.returncode != 0
        assert f"{name} {message}" in result.stderr


def test_behind_a_transaction_pooler_it_holds_no_server_side_state(tmp_path: Path) -> None:
    """Behind pgbouncer in transaction mode, no server-side cursor (declared on one server
    connection, fetched on another) and no prepared statement (pgbouncer < 1.21)."""
    show = (
        "from django.conf import settings; d = settings.DATABASES['default']; "
        "print(d['DISABLE_SERVER_SIDE_CURSORS'], d['OPTIONS']['prepare_threshold'], "
        "d['OPTIONS']['server_side_binding'])"
    )
    postgres = {"DATABASE_URL": "postgres://toolops@db.example.com/toolops"}
    plain = run_manage("shell", "-c", show, TOOLOPS_DATA_DIR=str(tmp_path), **postgres)
    assert plain.stdout.splitlines()[-1].split() == ["False", "5", "True"], plain.stderr
    pooled = run_manage(
        "shell",
        "-c",
        show,
        TOOLOPS_DATA_DIR=str(tmp_path),
        TOOLOPS_DB_TRANSACTION_POOLING="1",
        **postgres,
    )
    assert pooled.stdout.splitlines()[-1].split() == ["True", "None", "False"], pooled.stderr
    # pgbouncer 1.21+ with max_prepared_statements keeps them: said explicitly.
    kept = run_manage(
        "shell",
        "-c",
        show,
        TOOLOPS_DATA_DIR=str(tmp_path),
        TOOLOPS_DB_TRANSACTION_POOLING="1",
        TOOLOPS_DB_PREPARED="1",
        **postgres,
    )
    assert kept.stdout.splitlines()[-1].split() == ["True", "5", "True"], kept.stderr


def test_it_names_a_bad_shutdown_drain(tmp_path: Path) -> None:
    for value in ("-1", "nan", "601"):
        result = run_manage("check", TOOLOPS_SHUTDOWN_DRAIN_S=value, TOOLOPS_DATA_DIR=str(tmp_path))
        assert result.returncode != 0
        assert f"TOOLOPS_SHUTDOWN_DRAIN_S must be 0 to 600 seconds, got '{value}'" in result.stderr


def test_a_default_run_budget_past_what_a_run_stores_stops_the_process(tmp_path: Path) -> None:
    # A default max_attempts of 2**31 used to start, then fail every run's insert on
    # PostgreSQL (an int4 column).
    env = {"TOOLOPS_DATA_DIR": str(tmp_path)}
    for name, value in (
        ("TOOLOPS_DEFAULT_RUN_MAX_ATTEMPTS", str(2**31)),
        ("TOOLOPS_DEFAULT_RUN_MAX_TOKENS", str(2**63)),
        ("TOOLOPS_DEFAULT_RUN_MAX_SECONDS", "0"),
    ):
        result = run_manage("check", **{**env, name: value})
        assert result.returncode != 0
        assert f"{name} must be from" in result.stderr, result.stderr
    assert (
        run_manage("check", **env, TOOLOPS_DEFAULT_RUN_MAX_ATTEMPTS=str(2**31 - 1)).returncode == 0
    )
