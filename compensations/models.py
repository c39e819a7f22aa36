"""Saga compensations and the dead-letter tickets support staff work.

A Compensation is registered in the same statement that records the successful call it
undoes; the database row is the saga's source of truth, the broker only wakes workers.
A compensation that cannot be made to succeed opens exactly one Ticket; every action on a
ticket (by a person or by the worker) is a TicketEvent: the audit trail and the comment
thread in one list."""

from __future__ import annotations

from datetime import datetime

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from toolops.indexes import EqualityIndex
from toolops.models import Run, ToolCall, new_trace_id


class Compensation(models.Model):
    class Status(models.TextChoices):
        REGISTERED = "registered"  # the call succeeded; nothing to do unless the run aborts
        DISCARDED = "discarded"  # the run completed: never needed
        PENDING = "pending"  # the run aborts: waiting for a worker
        RUNNING = "running"  # a worker is calling the undo tool
        SUCCEEDED = "succeeded"
        DEAD_LETTERED = "dead_lettered"  # attempts used up; a ticket is open
        RESOLVED = "resolved"  # settled by a person

    # Still to be done, or being done: the run cannot end while any is.
    OPEN = (Status.REGISTERED, Status.PENDING, Status.RUNNING)

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="compensations")
    call = models.OneToOneField(ToolCall, on_delete=models.CASCADE, related_name="compensation")
    tool = models.CharField(max_length=128)
    args = models.JSONField(null=True, blank=True)
    # Why the args could not be mapped from the call (the result lacked a field): the
    # compensation cannot run, and a ticket opened when it was registered.
    problem = models.TextField(blank=True, default="")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.REGISTERED)
    # The undo's idempotency key: the same on every re-send of every round, so a
    # downstream that honours Idempotency-Key applies the undo once.
    key = models.CharField(max_length=64)
    # Each round (the worker's first go, then each retry a person asks for) is one
    # executor call of the undo tool, with its own attempts.
    rounds = models.PositiveIntegerField(default=0)
    undo_call = models.ForeignKey(
        ToolCall, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # Its spans start a new trace, linked to the span of the call it undoes.
    trace_id = models.CharField(max_length=32, default=new_trace_id)
    last_error = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)
    queued_at = models.DateTimeField(null=True, blank=True)
    # A queued round waiting for its undo tool's breaker (an open breaker would refuse
    # it unsent): no worker starts it before this time.
    not_before = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [
            models.Index(fields=["status", "queued_at"]),
            # The vault keys a compensation's sealed args by `key`: the retention purge
            # asks whether a compensation still refers to a sealed args row.
            EqualityIndex(fields=["key"], name="compensation_key"),
        ]

    def __str__(self) -> str:
        return f"{self.tool} for {self.call_id}"


class TicketQuerySet(models.QuerySet["Ticket"]):
    def open(self) -> TicketQuerySet:
        """Tickets still waiting for a person."""
        return self.filter(status=Ticket.Status.OPEN)

    def awake(self, now: datetime) -> TicketQuerySet:
        """Open tickets not snoozed at `now`: a snooze ends by itself when its time
        passes, judged at read time (no job wakes a ticket)."""
        return self.open().filter(Q(snoozed_until__isnull=True) | Q(snoozed_until__lte=now))

    def snoozed(self, now: datetime) -> TicketQuerySet:
        """Open tickets put aside until a time still to come."""
        return self.open().filter(snoozed_until__gt=now)


class Ticket(models.Model):
    class Status(models.TextChoices):
        OPEN = "open"
        CLOSED = "closed"

    class Reason(models.TextChoices):
        DEAD_LETTERED = "dead_lettered", "attempts used up"
        UNMAPPABLE = "unmappable", "undo args could not be built"

    compensation = models.OneToOneField(
        Compensation, on_delete=models.CASCADE, related_name="ticket"
    )
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="tickets")
    tool = models.CharField(max_length=128, help_text="The undo tool.")
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.OPEN)
    reason = models.CharField(max_length=16, choices=Reason.choices)
    assignee = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="tickets",
    )
    opened_at = models.DateTimeField(default=timezone.now)
    closed_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(default=timezone.now)
    # Put aside by a person until this time: it leaves the desk's Open list meanwhile.
    # Not cleared when the time passes (reads compare it with now); cleared when the
    # ticket is reopened or fails again, so news is never snoozed.
    snoozed_until = models.DateTimeField(null=True, blank=True)

    objects = TicketQuerySet.as_manager()

    # Not columns: what the desk's list says of a ticket in words, set on the instances
    # it shows (page.list_words; its wait by views.ticket_list) for the templates.
    title: str
    status_words: str
    error_words: str
    snooze_words: str
    waited: str

    class Meta:
        indexes = [models.Index(fields=["status", "opened_at"])]

    def __str__(self) -> str:
        return f"ticket {self.pk}: {self.tool} ({self.status})"


class TicketEvent(models.Model):
    """One thing that happened to a ticket, by whom (null: the worker) and when."""

    class Kind(models.TextChoices):
        OPENED = "opened"
        REOPENED = "reopened"
        ASSIGNED = "assigned"
        UNASSIGNED = "unassigned"
        RETRIED = "retried"
        SUCCEEDED = "succeeded"
        DEAD_LETTERED = "dead_lettered"
        RESOLVED = "resolved"
        CLOSED = "closed"
        COMMENT = "comment"
        SNOOZED = "snoozed"
        UNSNOOZED = "unsnoozed"

    ticket = models.ForeignKey(Ticket, on_delete=models.CASCADE, related_name="events")
    kind = models.CharField(max_length=16, choices=Kind.choices)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    text = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)

    # Not columns: the thread's words for an event, set on the instances the ticket page
    # shows (page._events) for its template: its kind, and its text with times said.
    words: str
    said: str

    class Meta:
        ordering = ["created_at", "pk"]
        indexes = [models.Index(fields=["ticket", "created_at"])]

    def __str__(self) -> str:
        return f"{self.kind} on ticket {self.ticket_id}"
