"""Who calls the executor: an agent, its token (stored as a digest only) and its
per-minute request windows. Registered with the toolops app through toolops/models.py."""

from __future__ import annotations

import hashlib
import secrets

from django.conf import settings
from django.db import models

TOKEN_PREFIX = "tops_"


def token_digest(token: str) -> str:
    """One SHA-256: irreversible for 32 random bytes, and a single indexed equality."""
    return hashlib.sha256(token.encode()).hexdigest()


class Agent(models.Model):
    name = models.CharField(max_length=128, unique=True)
    token_hash = models.CharField(max_length=64, unique=True)
    token_hint = models.CharField(max_length=16, help_text="First characters of the token.")
    is_active = models.BooleanField(default=True)
    rate_limit_per_minute = models.PositiveIntegerField(
        null=True, blank=True, help_text="Requests per minute; empty means no limit."
    )
    created_at = models.DateTimeField(auto_now_add=True)
    # The person answerable for the agent. Separation of duties: they may not approve its
    # calls (approvals/services.py), as an author may not approve their own change.
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="agents",
        help_text="Who runs this agent; they cannot approve its calls.",
    )
    # The last request with its token, to the minute (toolops/api/auth.py writes it at
    # most once a minute): a token nobody uses any more is one to revoke.
    last_used_at = models.DateTimeField(null=True, blank=True)

    # DRF treats whatever authentication returns as request.user.
    is_authenticated = True
    is_anonymous = False

    def __str__(self) -> str:
        return self.name

    def set_new_token(self) -> str:
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        self.token_hash = token_digest(token)
        self.token_hint = token[: len(TOKEN_PREFIX) + 4]
        return token


class RateWindow(models.Model):
    """A fixed one-minute window of one agent's requests, shared by every web process when
    the rate limit is counted without Redis: each adds its count every few requests
    (toolops/api/allowance.py). Scratch, not history: the retention purge deletes a
    window once its minute and the next are over (traces/retention.py)."""

    agent = models.ForeignKey(Agent, on_delete=models.CASCADE)
    window = models.BigIntegerField()
    count = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["agent", "window"], name="rate_window_unique")
        ]

    def __str__(self) -> str:
        return f"{self.agent_id}@{self.window}: {self.count}"
