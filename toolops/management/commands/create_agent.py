from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from toolops.models import Agent
from toolops.services import agent_create


class Command(BaseCommand):
    help = "Create an agent and print its API token (the last line of the output)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name")
        parser.add_argument(
            "--rate-limit",
            type=int,
            default=None,
            help="Requests per minute; 0 for no limit (default: "
            "TOOLOPS_AGENT_RATE_LIMIT_PER_MINUTE, 600 unless set).",
        )

    def handle(self, *args: Any, name: str, rate_limit: int | None, **options: Any) -> None:
        name = name.strip()
        if not name or len(name) > 128:
            raise CommandError("NAME must be 1–128 characters.")
        if rate_limit is None:
            # An operator who says nothing gets the deployment's default, not no limit.
            rate_limit = settings.TOOLOPS_AGENT_RATE_LIMIT_PER_MINUTE
        elif rate_limit < 0:
            raise CommandError("--rate-limit must be 0 (no limit) or more requests per minute.")
        if Agent.objects.filter(name=name).exists():
            raise CommandError(f"An agent named {name!r} already exists.")
        agent, token = agent_create(name=name, rate_limit_per_minute=rate_limit or None)
        limit = f"{rate_limit} requests a minute" if rate_limit else "no rate limit"
        self.stdout.write(
            f"Created agent {agent.name} ({limit}). Its token is shown once; store it now:"
        )
        self.stdout.write(token)
