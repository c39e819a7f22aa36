"""A fresh chaos database, migrated, with the run's agents and its reviewer. Runs in the
runner's own process, on Django pointed straight at the database (no proxy between) — or,
when Django in this process already serves another database (a pytest session starting a
stack), in a child process: `python -m tests.chaos.setup_db` prints the agents' tokens."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import subprocess
import sys
from typing import Any

import psycopg

from tests.chaos.stack import REVIEWER, ROOT

AGENTS = 4


def prepare(env: dict[str, str], password: str) -> list[str]:
    """A fresh database with the agents and the reviewer; the agents' tokens."""
    from django.conf import settings

    if settings.configured and settings.DATABASES["default"]["NAME"] != db_name(env):
        done = subprocess.run(
            [sys.executable, "-m", "tests.chaos.setup_db"],
            cwd=ROOT,
            env={**env, "CHAOS_REVIEWER_PASSWORD": password},
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"setting up {db_name(env)} failed:\n{done.stderr[-3000:]}")
        return list(json.loads(done.stdout.strip().splitlines()[-1]))
    fresh_database(env)
    tokens, _ = create_people(env, password)
    return tokens


def direct_env(env: dict[str, str]) -> dict[str, str]:
    """The stack's environment with the database reached without its fault proxy."""
    return {**env, "DATABASE_URL": f"postgres:///{db_name(env)}"}


def db_name(env: dict[str, str]) -> str:
    return env["DATABASE_URL"].rsplit("/", 1)[1]


def fresh_database(env: dict[str, str]) -> None:
    """Drop and create the database, migrated: cloned from a migrated template when one
    of these migrations exists (a clone takes a second, migrating an empty database some
    fifteen), else migrated and kept as that template for the next stack."""
    name = db_name(env)
    with psycopg.connect("dbname=postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        cloned = _clone(conn, name, template_name())
        if not cloned:
            conn.execute(f'CREATE DATABASE "{name}"')
    # Also after a clone: what a newer installed package added since the template.
    migrate = [sys.executable, "manage.py", "migrate", "--noinput", "-v0"]
    subprocess.run(migrate, cwd=ROOT, env=direct_env(env), check=True)
    if not cloned:
        with psycopg.connect("dbname=postgres", autocommit=True) as conn:
            if _clone(conn, template_name(), name):
                _drop_old_templates(conn)
    django_setup(env)


def template_name() -> str:
    """Named by the digest of the project's migrations: a changed migration, a new one,
    makes (and uses) another template."""
    digest = hashlib.sha256()
    for path in sorted(ROOT.glob("*/migrations/*.py")):
        digest.update(path.name.encode() + path.read_bytes())
    return f"toolops_chaos_template_{digest.hexdigest()[:16]}"


def _drop_old_templates(conn: psycopg.Connection[Any]) -> None:
    """Templates of earlier migrations are of no more use: dropped (one in use by a
    clone under way is left for the next time)."""
    rows = conn.execute(
        "SELECT datname FROM pg_database WHERE datname LIKE 'toolops\\_chaos\\_template\\_%%'"
        " AND datname <> %s",
        [template_name()],
    ).fetchall()
    for (old,) in rows:
        with contextlib.suppress(psycopg.errors.ObjectInUse):
            conn.execute(f'DROP DATABASE IF EXISTS "{old}"')


def _clone(conn: psycopg.Connection[Any], name: str, source: str) -> bool:
    """CREATE DATABASE name TEMPLATE source; False when source is missing or in use (a
    concurrent clone), or name exists (another stack made the template first)."""
    try:
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{source}"')
    except (
        psycopg.errors.InvalidCatalogName,
        psycopg.errors.ObjectInUse,
        psycopg.errors.DuplicateDatabase,
    ):
        return False
    return True


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


if __name__ == "__main__":
    # The child of prepare(): the stack's environment, the reviewer's password beside it.
    environment = dict(os.environ)
    secret = environment.pop("CHAOS_REVIEWER_PASSWORD")
    fresh_database(environment)
    print(json.dumps(create_people(environment, secret)[0]))
