from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from toolops.accounts.tokens import agent_token_rotate, via_command
from toolops.models import Agent
from toolops.services import agent_create


class Command(BaseCommand):
    help = (
        "Create an agent and print its API token (the last line of the output). With "
        "--rotate, give an existing agent a new token instead: the old one is refused from "
        "then on (a revoked agent is active again)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name")
        parser.add_argument(
            "--rate-limit",
            type=int,
            default=None,
            help="Requests per minute; 0 for no limit (default: "
            "TOOLOPS_AGENT_RATE_LIMIT_PER_MINUTE, 600 unless set).",
        )
        parser.add_argument(
            "--owner",
            default=None,
            help="Username of the person who runs the agent: they cannot approve its calls.",
        )
        parser.add_argument(
            "--rotate",
            action="store_true",
            help="Replace the token of the existing agent NAME; the old token stops working.",
        )

    def handle(
        self,
        *args: Any,
        name: str,
        rate_limit: int | None,
        owner: str | None,
        rotate: bool,
        **options: Any,
    ) -> None:
        name = name.strip()
        if not name or len(name) > 128:
            raise CommandError("NAME must be 1–128 characters.")
        if rotate:
            if owner is not None:
                raise CommandError("--rotate changes only the token; set an owner in the admin.")
            self._rotate(name, rate_limit)
            return
        if rate_limit is None:
            # An operator who says nothing gets the deployment's default, not no limit.
            rate_limit = settings.TOOLOPS_AGENT_RATE_LIMIT_PER_MINUTE
        elif rate_limit < 0:
            raise CommandError("--rate-limit must be 0 (no limit) or more requests per minute.")
        if Agent.objects.filter(name=name).exists():
            raise CommandError(
                f"An agent named {name!r} already exists (--rotate gives it a new token)."
            )
        person = _person(owner) if owner is not None else None
        agent, token = agent_create(
            name=name,
            rate_limit_per_minute=rate_limit or None,
            owner=person,
            via=via_command("create_agent"),
        )
        limit = f"{rate_limit} requests a minute" if rate_limit else "no rate limit"
        self.stdout.write(
            f"Created agent {agent.name} ({limit}). Its token is shown once; store it now:"
        )
        self.stdout.write(token)

    def _rotate(self, name: str, rate_limit: int | None) -> None:
        if rate_limit is not None:
            raise CommandError(
                "--rotate changes only the token; set a rate limit at /console/agents/."
            )
        agent = Agent.objects.filter(name=name).first()
        if agent is None:
            raise CommandError(f"No agent is named {name!r}: create it without --rotate.")
        token = agent_token_rotate(agent=agent, via=via_command("create_agent --rotate"))
        self.stdout.write(
            f"New token for agent {agent.name}; the old one no longer works. "
            "It is shown once; store it now:"
        )
        self.stdout.write(token)


def _person(username: str) -> Any:
    person = get_user_model().objects.filter(username=username).first()
    if person is None:
        raise CommandError(f"--owner: no user named {username!r}.")
    return person
