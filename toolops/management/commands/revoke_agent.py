from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from toolops.accounts.tokens import agent_revoke, via_command
from toolops.api.auth import AGENT_CACHE_S
from toolops.models import Agent


class Command(BaseCommand):
    help = (
        "Revoke an agent's API token: every request with it answers 401. "
        "`create_agent NAME --rotate` issues a new one."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name")

    def handle(self, *args: Any, name: str, **options: Any) -> None:
        agent = Agent.objects.filter(name=name.strip()).first()
        if agent is None:
            raise CommandError(f"No agent is named {name.strip()!r}.")
        if agent_revoke(agent=agent, via=via_command("revoke_agent")):
            self.stdout.write(
                f"Revoked the token of agent {agent.name}: requests with it answer 401 "
                f"(in web processes already running, within {AGENT_CACHE_S:g} s)."
            )
        else:
            self.stdout.write(f"Agent {agent.name} was revoked already; its token stays refused.")
