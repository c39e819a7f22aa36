"""What traces/ keeps besides the call and attempt rows (which are the stored spans):
the sealed full args, the audit of who read them, replay counts for the metrics, and the
search index of business keys (by HMAC)."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


class SealedArgs(models.Model):
    """The full args of calls whose stored args were redacted, encrypted at rest
    (MultiFernet, TOOLOPS_ARGS_KEYS): a row per call, keyed by its call_id, and per
    compensation, by its idempotency key (traces/vault.py). Args with nothing to redact
    are stored as they are and have no row here."""

    # The owner's key (named when rows were keyed by the args hash).
    digest = models.CharField(max_length=64, primary_key=True)
    token = models.TextField()
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        # The retention purge looks only at rows older than the retention.
        indexes = [models.Index(fields=["created_at"], name="sealed_args_created")]

    def __str__(self) -> str:
        return self.digest


class FullArgsRead(models.Model):
    """One look at a call's full (unredacted) args and result by a person, as recorded
    before the one audit log (toolops/audit/), which records every look now: no longer
    written (migration toolops 0012 copied the rows into the log). Kept for the rows, and
    because `traces.view_full_args`, granted to people and groups, is defined here."""

    class Purpose(models.TextChoices):
        CONSOLE = "console", "console (view_full_args)"
        APPROVAL = "approval", "reviewing an approval"

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    call = models.ForeignKey(
        "toolops.ToolCall", null=True, on_delete=models.SET_NULL, related_name="+"
    )
    call_ref = models.CharField(max_length=40, help_text="The call's call_id, kept past purges.")
    purpose = models.CharField(max_length=16, choices=Purpose.choices)
    at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        permissions = [("view_full_args", "Can view the full, unredacted args of a call")]

    def __str__(self) -> str:
        return f"{self.user} read {self.call_ref} ({self.purpose})"


class ReplayCount(models.Model):
    """Idempotency replays per tool and minute: a replay writes no call row, so the
    metrics (`toolops_idempotency_replays_total`, the hit rate) count them here."""

    tool = models.CharField(max_length=128)
    minute = models.DateTimeField()
    # Concurrent replays of one tool would all update one row and wait on each other's
    # commit: they spread over a few rows, which every reader sums.
    shard = models.PositiveSmallIntegerField(default=0)
    count = models.PositiveBigIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["tool", "minute", "shard"], name="replay_tool_minute_shard"
            )
        ]

    def __str__(self) -> str:
        return f"{self.tool} {self.minute:%H:%M}: {self.count}"


class SearchKey(models.Model):
    """One value a catalog tool marks `searchable` (an order id, a charge id, a customer's
    e-mail) in one call's args or result, kept only as its HMAC (traces/search.py): the
    console search finds the run by a value a person has, and nobody can read the value
    back from this table. Written with the call's result, in the same statement; gone with
    the call or its run (the retention purge deletes runs through Django's cascade)."""

    run = models.ForeignKey("toolops.Run", on_delete=models.CASCADE, related_name="+")
    # Indexed by the unique constraint, whose leading column it is.
    call = models.ForeignKey(
        "toolops.ToolCall", on_delete=models.CASCADE, related_name="+", db_index=False
    )
    field = models.CharField(max_length=128, help_text="The catalog's path, e.g. order_id.")
    digest = models.CharField(max_length=64, help_text="HMAC-SHA256 of the normalized value.")

    class Meta:
        constraints = [
            # A call recorded again (an unknown outcome settled later) adds nothing twice.
            models.UniqueConstraint(fields=["call", "field", "digest"], name="search_key_unique")
        ]
        indexes = [models.Index(fields=["digest"], name="search_key_digest")]

    def __str__(self) -> str:
        return f"{self.field} of call #{self.call_id}"
