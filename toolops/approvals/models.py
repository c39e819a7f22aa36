"""An approval: one call waiting for a person, decided once, atomically, by one named
reviewer (or two distinct ones where the tool requires it). Every vote is kept, with the
args hash the reviewer was shown."""

from __future__ import annotations

import secrets

from django.conf import settings
from django.db import models
from django.utils import timezone

# The live group of the reviewers' pages (toolops/live.py): told of every new approval,
# decision and ending.
LIVE_GROUP = "approvals"


def new_approval_id() -> str:
    return f"ap-{secrets.token_hex(12)}"


class ApprovalQuerySet(models.QuerySet["Approval"]):
    def pending(self) -> ApprovalQuerySet:
        """Still waiting for a decision (expired ones too, until the worker ends them)."""
        return self.filter(status=Approval.Status.PENDING)


class Approval(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending"
        APPROVED = "approved"
        REJECTED = "rejected"
        EXPIRED = "expired"

    class Reason(models.TextChoices):
        IRREVERSIBLE = "irreversible", "cannot be undone"
        POLICY = "policy", "policy requires a person"
        POSSIBLE_DUPLICATE = "possible_duplicate", "possible duplicate"

    approval_id = models.CharField(max_length=40, unique=True, default=new_approval_id)
    run = models.ForeignKey("toolops.Run", on_delete=models.CASCADE, related_name="approvals")
    tool = models.CharField(max_length=128)
    reason = models.CharField(max_length=24, choices=Reason.choices)
    # The earlier call this one may repeat (another run of the same session).
    duplicate_of = models.ForeignKey(
        "toolops.ToolCall", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # The canonical args digest the reviewer is shown: a decision names the one it saw.
    args_hash = models.CharField(max_length=64)
    approvals_required = models.PositiveSmallIntegerField(default=1)
    # Held by the agent policy: the rule (or limit) that asked for a person, and the
    # version it belongs to (API.md "Agent policy").
    rule = models.CharField(max_length=200, blank=True, default="")
    policy_version = models.PositiveIntegerField(null=True, blank=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    expires_at = models.DateTimeField()
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    note = models.TextField(blank=True, default="")
    # Set by the one worker task that executes an approved call (a duplicate message, or
    # the sweep, finds it set and does nothing).
    execution_started_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    objects = ApprovalQuerySet.as_manager()

    class Meta:
        indexes = [models.Index(fields=["status", "created_at"])]

    def __str__(self) -> str:
        return self.approval_id


class ApprovalVote(models.Model):
    """One reviewer's decision on one approval: the audit trail, and what makes "two
    distinct reviewers" countable (one vote per reviewer)."""

    class Decision(models.TextChoices):
        APPROVE = "approve"
        REJECT = "reject"

    approval = models.ForeignKey(Approval, on_delete=models.CASCADE, related_name="votes")
    reviewer = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    decision = models.CharField(max_length=8, choices=Decision.choices)
    note = models.TextField(blank=True, default="")
    args_hash = models.CharField(max_length=64, help_text="The args hash the reviewer saw.")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["created_at", "pk"]
        constraints = [
            models.UniqueConstraint(fields=["approval", "reviewer"], name="one_vote_per_reviewer")
        ]

    def __str__(self) -> str:
        return f"{self.decision} by {self.reviewer_id} on {self.approval_id}"
