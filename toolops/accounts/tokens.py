"""Agents' tokens: a new one in place of the old (rotate), or none at all (revoke).

Only a token's SHA-256 is stored, so either is one UPDATE of the agent's row: the old
token's digest stops matching at once. Web processes keep a token → agent cache for
AGENT_CACHE_S (toolops/api/auth.py): saving the agent clears this process's entries, and
the other processes' run out within that time."""

from __future__ import annotations

import getpass
import secrets
from typing import Any

from django.db import transaction

from toolops.accounts.models import TOKEN_PREFIX, Agent, token_digest
from toolops.audit.services import Action, audit_record


def via_command(command: str) -> str:
    """What a token change was made with, for the audit log: a shell has no console login,
    so the OS user stands for the person."""
    try:
        return f"manage.py {command} (OS user {getpass.getuser()})"
    except (OSError, KeyError):
        return f"manage.py {command}"


def agent_token_rotate(*, agent: Agent, by: Any = None, via: str = "") -> str:
    """A new token for `agent`, returned once; the old one is refused from now on. A revoked
    agent is active again with the new token. Audited with `by` (None from a shell) and
    `via` (what made the change)."""
    with transaction.atomic():
        agent = Agent.objects.select_for_update().get(pk=agent.pk)
        token = agent.set_new_token()
        agent.is_active = True
        agent.save(update_fields=["token_hash", "token_hint", "is_active"])
        audit_record(
            actor=by,
            action=Action.TOKEN_ROTATE,
            obj=agent,
            detail={"agent": agent.name, "hint": agent.token_hint, "via": via},
            summary=f"Gave agent {agent.name} a new token ({agent.token_hint}…)"
            + (f" via {via}" if via else ""),
        )
    return token


def agent_revoke(*, agent: Agent, by: Any = None, via: str = "") -> bool:
    """Withdraw `agent`'s token: every request with it answers 401. The stored digest is
    replaced by one of a token nobody was ever shown, so re-activating the agent by hand
    does not bring the old token back (`create_agent NAME --rotate` issues a new one).
    False if it was revoked already."""
    with transaction.atomic():
        agent = Agent.objects.select_for_update().get(pk=agent.pk)
        was_active = agent.is_active
        agent.token_hash = token_digest(TOKEN_PREFIX + secrets.token_urlsafe(32))
        agent.is_active = False
        agent.save(update_fields=["token_hash", "is_active"])
        audit_record(
            actor=by,
            action=Action.TOKEN_REVOKE,
            obj=agent,
            detail={"agent": agent.name, "was_active": was_active, "via": via},
            summary=f"Revoked the token of agent {agent.name}" + (f" via {via}" if via else ""),
        )
    return was_active
