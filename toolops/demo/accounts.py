"""The demo's people and agents, made (or repaired) each time the demo starts, their
passwords and the agents' tokens kept in the logins file between runs
(toolops/demo/logins.py, which the Django-free scripted agent reads too)."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from pathlib import Path

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group

from toolops.accounts.models import Agent, token_digest
from toolops.demo.logins import (
    AGENT_KEY,
    AGENT_NAME,
    CASHIER_KEY,
    CASHIER_NAME,
    LOGINS_FILE,
    read_secrets,
    write_secrets,
)
from toolops.services import agent_create

# username → (group, what the person does); admin is a superuser.
DEMO_USERS: dict[str, tuple[str | None, str]] = {
    "admin": (None, "superuser: everything, and /admin/"),
    "reviewer": ("reviewers", "approves or rejects calls that wait for a person"),
    "support": ("support", "works dead-letter tickets"),
    "operator": ("operators", "run timelines, tool health, breakers, policies"),
}


def ensure_user(username: str, group: str | None, password: str | None) -> str | None:
    """Create or repair one demo user. Returns its password, or None for an account that
    existed before the demo recorded one (its password is left alone)."""
    user_model = get_user_model()
    user = user_model.objects.filter(username=username).first()
    if user is None:
        password = password or secrets.token_urlsafe(9)
        if group is None:
            user = user_model.objects.create_superuser(
                username, f"{username}@example.com", password
            )
        else:
            user = user_model.objects.create_user(username, f"{username}@example.com", password)
    elif password is None:
        return None
    elif not user.check_password(password):
        user.set_password(password)
        user.save(update_fields=["password"])
    if group is not None:
        user.groups.add(Group.objects.get_or_create(name=group)[0])
    return password


def ensure_agent(token: str | None, name: str = AGENT_NAME) -> str:
    """A demo agent, with the stored token when it still matches, else a new one."""
    agent = Agent.objects.filter(name=name).first()
    if agent is None:
        return agent_create(name=name)[1]
    if token and agent.token_hash == token_digest(token) and agent.is_active:
        return token
    token = agent.set_new_token()
    agent.is_active = True
    agent.save(update_fields=["token_hash", "token_hint", "is_active"])
    return token


@dataclass
class Logins:
    """The demo's logins as this run found or made them."""

    passwords: dict[str, str | None]
    token: str
    token_is_new: bool  # made (or re-issued) by this run: printed once, now
    path: Path
    # demo-cashier's, for the daily-limit scenario; never printed (it is in the file).
    cashier_token: str = ""


def load_demo_logins(data_dir: Path) -> Logins:
    path = data_dir / LOGINS_FILE
    stored = read_secrets(path)
    passwords = {
        name: ensure_user(name, group, stored.get(name)) for name, (group, _) in DEMO_USERS.items()
    }
    token = ensure_agent(stored.get(AGENT_KEY))
    cashier = ensure_agent(stored.get(CASHIER_KEY), CASHIER_NAME)
    recorded = {name: pw for name, pw in passwords.items() if pw is not None}
    write_secrets(path, {**recorded, AGENT_KEY: token, CASHIER_KEY: cashier})
    return Logins(passwords, token, token != stored.get(AGENT_KEY), path, cashier)
