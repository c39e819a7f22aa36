"""The floor's three small tables: the least a recorded tool call needs."""

from __future__ import annotations

from django.db import models


class FloorClaim(models.Model):
    """The idempotency claim: a unique key decides the one winner."""

    key = models.CharField(max_length=64, unique=True)
    call_ref = models.CharField(max_length=40)
    tool = models.CharField(max_length=128)
    state = models.CharField(max_length=16)
    lease_until = models.DateTimeField()
    expires_at = models.DateTimeField()

    def __str__(self) -> str:
        return self.key


class FloorResult(models.Model):
    """The call and its result."""

    call_id = models.CharField(max_length=40, unique=True)
    run_ref = models.CharField(max_length=128)
    step_index = models.PositiveIntegerField()
    tool = models.CharField(max_length=128)
    args = models.JSONField()
    status = models.CharField(max_length=24)
    result = models.JSONField(null=True)
    feedback = models.TextField(default="")
    created_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True)

    def __str__(self) -> str:
        return self.call_id


class FloorSpan(models.Model):
    """One attempt: a child span of the call."""

    call = models.ForeignKey(FloorResult, on_delete=models.CASCADE)
    number = models.PositiveIntegerField()
    span_id = models.CharField(max_length=16)
    started_at = models.DateTimeField()
    duration_ms = models.FloatField()
    http_status = models.PositiveIntegerField(null=True)
    outcome = models.CharField(max_length=16)

    def __str__(self) -> str:
        return f"{self.call_id}#{self.number}"
