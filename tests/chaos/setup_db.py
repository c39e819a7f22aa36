"""A fresh chaos database, migrated, with the run's agents and its reviewer. Runs in the
runner's own process, on Django pointed straight at the database (no proxy between)."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import psycopg

from tests.chaos.stack import REVIEWER, ROOT

AGENTS = 4


def direct_env(env: dict[str, str]) -> dict[str, str]:
    """The stack's environment with the database reached without its fault proxy."""
    return {**env, "DATABASE_URL": f"postgres:///{db_name(env)}"}


def db_name(env: dict[str, str]) -> str:
    return env["DATABASE_URL"].rsplit("/", 1)[1]


def fresh_database(env: dict[str, str]) -> None:
    name = db_name(env)
    with psycopg.connect("dbname=postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput", "-v0"],
        cwd=ROOT,
        env=direct_env(env),
        check=True,
    )
    django_setup(env)


def django_setup(env: dict[str, str]) -> None:
    """Django in this process, on the chaos database and catalog (once)."""
    import django
    from django.conf import settings

    if settings.configured:
        return
    os.environ.update(direct_env(env))
    os.environ["DJANGO_SETTINGS_MODULE"] = "toolops.settings"
    django.setup()


def create_people(env: dict[str, str], password: str) -> tuple[list[str], Any]:
    """The agents' tokens, and the reviewer (in `reviewers` and `support`)."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group

    from toolops.services import agent_create

    tokens = [agent_create(name=f"chaos-agent-{i + 1}")[1] for i in range(AGENTS)]
    user = get_user_model().objects.create_user(REVIEWER, f"{REVIEWER}@example.com", password)
    # Support too: the checker reads the desk's pages as this person.
    user.groups.add(*Group.objects.filter(name__in=["reviewers", "support"]))
    return tokens, user
