"""The agent policy's rows (API.md "Agent policy"): each version of the one policy
document, and each spend counter its limits keep. Registered with the toolops app
through toolops/models.py.

A version is never edited: an apply or a rollback adds one. The active version is the
highest-numbered one in force (`APPLIED`); with two operators required, an apply waits
as `PROPOSED` until a second operator confirms it (or anyone withdraws it)."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


class PolicyVersion(models.Model):
    class State(models.TextChoices):
        APPLIED = "applied"
        PROPOSED = "proposed"
        WITHDRAWN = "withdrawn"

    number = models.PositiveIntegerField(unique=True)
    text = models.TextField()
    digest = models.CharField(max_length=64, help_text="SHA-256 of the text.")
    note = models.TextField()
    state = models.CharField(max_length=10, choices=State.choices, default=State.APPLIED)
    # A rollback's version names the one it restored.
    restores = models.PositiveIntegerField(null=True, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    # Who ran it from a shell, when nobody signed in did (the OS user, or "command").
    created_by_name = models.CharField(max_length=150, blank=True, default="")
    confirmed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    created_at = models.DateTimeField(default=timezone.now)
    applied_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [
            # The active version: the highest number in force, read with every call.
            models.Index(
                fields=["-number"],
                condition=models.Q(state="applied"),
                name="policy_version_applied",
            )
        ]

    def __str__(self) -> str:
        return f"policy v{self.number}"

    @property
    def author(self) -> str:
        person = self.created_by
        return person.get_username() if person is not None else self.created_by_name


class SpendCounter(models.Model):
    """What one agent has reserved under one limit in one period (and currency): the
    row every admitting call updates under its cap (toolops/policy/limits.py), so racing
    calls on any number of processes never pass it."""

    limit = models.CharField(max_length=200)
    agent = models.ForeignKey("toolops.Agent", on_delete=models.CASCADE, db_index=False)
    # "2026-12-07", "2026-W50", "2026-12" or "total", in the limit's time zone.
    period = models.CharField(max_length=16)
    currency = models.CharField(max_length=16, blank=True, default="")
    # In units: calls for a count, ten-thousandths for a sum (Cedar's precision), so
    # both databases add exactly.
    spent = models.BigIntegerField(default=0)
    # The max of the version that last reserved here (null: reserved past it, by a
    # reviewer's leave); each reservation is checked against its own statement's max.
    cap = models.BigIntegerField(null=True, blank=True)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["agent", "limit", "period", "currency"], name="spend_counter_unique"
            )
        ]

    def __str__(self) -> str:
        return f"{self.limit} {self.agent_id} {self.period} {self.currency}: {self.spent}"
