from __future__ import annotations

import getpass
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from toolops.models import Agent
from toolops.services import agent_create


def _who() -> str:
    """The shell's user, for the audit log: a command has no console login."""
    try:
        return f" (OS user {getpass.getuser()})"
    except (OSError, KeyError):
        return ""


class Command(BaseCommand):
    help = "Create an agent and print its API token (the last line of the output)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name")
        parser.add_argument(
            "--rate-limit", type=int, default=None, help="Requests per minute (default: none)."
        )
        parser.add_argument(
            "--owner", default=None,
            help="Username of the person who runs the agent: they cannot approve its calls.",
        )  # fmt: skip

    def handle(
        self, *args: Any, name: str, rate_limit: int | None, owner: str | None, **options: Any
    ) -> None:
        name = name.strip()
        if not name or len(name) > 128:
            raise CommandError("NAME must be 1–128 characters.")
        if rate_limit is not None and rate_limit < 1:
            raise CommandError("--rate-limit must be at least 1 request per minute.")
        if Agent.objects.filter(name=name).exists():
            raise CommandError(f"An agent named {name!r} already exists.")
        person = _person(owner) if owner is not None else None
        agent, token = agent_create(
            name=name,
            rate_limit_per_minute=rate_limit,
            owner=person,
            via=f"manage.py create_agent{_who()}",
        )
        self.stdout.write(f"Created agent {agent.name}. Its token is shown once; store it now:")
        self.stdout.write(token)


def _person(username: str) -> Any:
    from django.contrib.auth import get_user_model

    person = get_user_model().objects.filter(username=username).first()
    if person is None:
        raise CommandError(f"--owner: no user named {username!r}.")
    return person
