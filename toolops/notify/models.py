"""What ToolOps tells people: an Event, recorded once by its key in the transaction of
what caused it; one Delivery per recipient and channel, the outbox row the worker claims,
sends (folded with others due for the same recipient) and retries; and each person's
Preference for which kinds reach them by e-mail."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


class Kind(models.TextChoices):
    APPROVAL_WAITING = "approval_waiting", "An approval is waiting"
    APPROVAL_EXPIRING = "approval_expiring", "An approval is about to expire"
    TICKET_OPENED = "ticket_opened", "An undo failed: a ticket was opened"
    TICKET_UNASSIGNED = "ticket_unassigned", "A ticket has waited too long without anyone"
    BREAKER_OPENED = "breaker_opened", "A tool was switched off (its breaker opened)"


class NotificationEvent(models.Model):
    """One thing worth telling. `key` ("approval_waiting:ap-…") is unique: recording the
    same event again inserts nothing and so sends nothing."""

    key = models.CharField(max_length=200, unique=True)
    kind = models.CharField(max_length=24, choices=Kind.choices)
    # What it is about: an approval_id, a ticket's number, a tool's name.
    ref = models.CharField(max_length=128)
    created_at = models.DateTimeField(default=timezone.now)
    # Written by the worker when it works out the message and its recipients, once.
    fanned_out_at = models.DateTimeField(null=True, blank=True)
    subject = models.CharField(max_length=300, blank=True, default="")
    text = models.TextField(blank=True, default="")
    fields = models.JSONField(default=list, blank=True)
    link = models.CharField(max_length=500, blank=True, default="")
    # Why nothing was sent, when nothing was (e.g. decided before the message went out).
    note = models.CharField(max_length=300, blank=True, default="")

    class Meta:
        indexes = [
            # The sweep's look for events whose worker message was lost.
            models.Index(
                fields=["created_at"],
                condition=models.Q(fanned_out_at__isnull=True),
                name="notify_event_not_fanned",
            )
        ]

    def __str__(self) -> str:
        return self.key


class NotificationDelivery(models.Model):
    """One event to one recipient on one channel: the outbox row."""

    class Channel(models.TextChoices):
        EMAIL = "email", "e-mail"
        WEBHOOK = "webhook", "webhook"

    class Status(models.TextChoices):
        PENDING = "pending", "waiting to be sent"
        SENDING = "sending", "being sent"
        SENT = "sent", "sent"
        FAILED = "failed", "failed"

    event = models.ForeignKey(
        NotificationEvent, on_delete=models.CASCADE, related_name="deliveries"
    )
    channel = models.CharField(max_length=8, choices=Channel.choices)
    # An e-mail address, or a group's name for its webhook.
    target = models.CharField(max_length=254)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    last_error = models.CharField(max_length=500, blank=True, default="")
    next_attempt_at = models.DateTimeField(default=timezone.now)
    # While `sending`: past this, the sender is taken for dead and the row is due again.
    lease_until = models.DateTimeField(null=True, blank=True)
    # The message it went out in: deliveries folded into one message share it.
    batch = models.CharField(max_length=32, blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)
    sent_at = models.DateTimeField(null=True, blank=True)
    # When the person first followed the signed link in it (notify/links.py).
    opened_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["event", "channel", "target"], name="notify_delivery_once"
            )
        ]
        indexes = [
            models.Index(fields=["channel", "target", "status", "next_attempt_at"]),
            models.Index(fields=["status", "next_attempt_at"]),
            models.Index(fields=["-created_at"]),
        ]

    def __str__(self) -> str:
        return f"{self.event_id} → {self.channel}:{self.target} ({self.status})"

    @property
    def webhook_group(self) -> str:
        """A webhook delivery's group: its target is the group ("operators", the
        environment's webhook) or "operators#7" (a webhook added in the console)."""
        return self.target.partition("#")[0]

    @property
    def webhook_number(self) -> str:
        """The console webhook's number ("7"); "" for the environment's."""
        return self.target.partition("#")[2]


class NotificationPreference(models.Model):
    """A person's choice for one kind; no row means the default (docs/notifications.md)."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notify_preferences"
    )
    kind = models.CharField(max_length=24, choices=Kind.choices)
    email = models.BooleanField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "kind"], name="notify_preference_once")
        ]

    def __str__(self) -> str:
        return f"{self.user_id} {self.kind}: {'on' if self.email else 'off'}"


class Webhook(models.Model):
    """A group's webhook added in the console (the environment's live in settings:
    TOOLOPS_WEBHOOK_<GROUP>_URL/_SECRET). Its URL and secret are kept encrypted together
    in `sealed` (traces/vault.py, TOOLOPS_ARGS_KEYS): a chat tool's incoming-webhook URL
    is a credential of its own, not only the secret. `shown` is the URL as pages and the
    audit log show it, its secret parts cut (toolops/notify/hooks.py `shown_url`)."""

    group = models.CharField(max_length=16)
    label = models.CharField(max_length=80, blank=True, default="")
    shown = models.CharField(max_length=200)
    sealed = models.TextField()
    created_at = models.DateTimeField(default=timezone.now)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )

    class Meta:
        indexes = [models.Index(fields=["group", "created_at"])]

    def __str__(self) -> str:
        return self.target

    @property
    def target(self) -> str:
        """Its deliveries' `target`: "operators#7" (the environment's is "operators")."""
        return f"{self.group}#{self.pk}"
