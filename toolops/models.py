"""The executor's records: who calls (Agent), the agent loop (Run), each tool call, each
real request (Attempt), the idempotency claim, and the operator-tunable tool policy."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

# Models of this app that live in packages of their own, registered with it from here.
from toolops.accounts.models import Agent, RateWindow
from toolops.approvals.models import Approval, ApprovalVote
from toolops.audit.models import AuditEntry
from toolops.ids import new_span_id, new_trace_id
from toolops.notify.models import (
    NotificationDelivery,
    NotificationEvent,
    NotificationPreference,
)
from toolops.policy.models import PolicyVersion, SpendCounter


class RunQuerySet(models.QuerySet["Run"]):
    def for_agent(self, agent: Agent) -> RunQuerySet:
        """Runs an agent may see: only its own."""
        return self.filter(agent=agent)


class Run(models.Model):
    class Status(models.TextChoices):
        RUNNING = "running"
        COMPLETED = "completed"
        ABORTING = "aborting"
        ABORTED = "aborted"
        COMPENSATION_FAILED = "compensation_failed"
        BUDGET_EXHAUSTED = "budget_exhausted"

    # Abort was asked for: compensating, or ended either way. Another abort is a repeat.
    ABORT_STATES = (Status.ABORTING, Status.ABORTED, Status.COMPENSATION_FAILED)

    # No index of its own: the unique (agent, run_id) index serves every look-up by agent,
    # and a second one let the planner pick it for a new agent's runs.
    agent = models.ForeignKey(Agent, on_delete=models.PROTECT, related_name="runs", db_index=False)
    run_id = models.CharField(max_length=128)
    trace_id = models.CharField(max_length=32)
    # null, not "": runs without a session key are never compared with each other.
    session_key = models.CharField(max_length=128, null=True, blank=True)  # noqa: DJ001
    status = models.CharField(max_length=24, choices=Status.choices, default=Status.RUNNING)
    max_attempts = models.PositiveIntegerField(null=True, blank=True)
    max_seconds = models.FloatField(null=True, blank=True)
    max_tokens = models.PositiveBigIntegerField(null=True, blank=True)
    attempts_used = models.PositiveIntegerField(default=0)
    tokens_used = models.PositiveBigIntegerField(default=0)
    metadata = models.JSONField(default=dict, blank=True)
    end_reason = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)
    ended_at = models.DateTimeField(null=True, blank=True)

    objects = RunQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["agent", "run_id"], name="run_agent_run_id_unique")
        ]
        indexes = [
            models.Index(fields=["-created_at"]),
            # In pattern order, for the runs filter's trace_id prefix (as call_tool_call_id).
            models.Index(
                fields=["trace_id"], name="run_trace_id", opclasses=["varchar_pattern_ops"]
            ),
            models.Index(fields=["session_key", "created_at"]),
            # The retention purge's walk through ended runs, oldest first. Partial: a run
            # is inserted with no ended_at, so only its one ending writes an entry.
            models.Index(
                fields=["ended_at"], condition=models.Q(ended_at__isnull=False), name="run_ended_at"
            ),
        ]

    def __str__(self) -> str:
        return self.run_id

    @property
    def has_limits(self) -> bool:
        """Only a limited run keeps usage counters on its row (they enforce the budget);
        an unlimited run's usage is summed from its calls, sparing a hot row update."""
        return any(v is not None for v in (self.max_attempts, self.max_seconds, self.max_tokens))

    def seconds_used(self) -> float:
        end = self.ended_at or timezone.now()
        return max(0.0, (end - self.created_at).total_seconds())


class ToolCallQuerySet(models.QuerySet["ToolCall"]):
    def agent_calls(self) -> ToolCallQuerySet:
        """The agent's own calls: what the API, the summary and the budget count (not the
        worker's undo calls)."""
        return self.filter(role=ToolCall.Role.CALL)


class ToolCall(models.Model):
    class Status(models.TextChoices):
        SUCCEEDED = "succeeded"
        DEGRADED = "degraded"
        FAILED = "failed"
        UNKNOWN = "unknown"
        SKIPPED = "skipped"
        PENDING_APPROVAL = "pending_approval"
        REJECTED = "rejected"
        IN_PROGRESS = "in_progress"

    class ErrorClass(models.TextChoices):
        FATAL = "fatal"
        RETRY = "retry"
        UNKNOWN = "unknown"

    class Reason(models.TextChoices):
        INVALID_ARGS = "invalid_args"
        UNKNOWN_TOOL = "unknown_tool"
        DOWNSTREAM_ERROR = "downstream_error"
        TIMEOUT = "timeout"
        CIRCUIT_OPEN = "circuit_open"
        BUDGET_EXHAUSTED = "budget_exhausted"
        DEPENDENCY_FAILED = "dependency_failed"
        RESULT_INVALID = "result_invalid"
        REJECTED = "rejected"
        EXPIRED = "expired"
        # The agent policy refused it (API.md "Agent policy").
        NOT_PERMITTED = "not_permitted"
        SPEND_LIMIT = "spend_limit"

    class Role(models.TextChoices):
        CALL = "call", "agent's call"
        UNDO = "undo", "compensation"

    WAITING = (Status.PENDING_APPROVAL, Status.IN_PROGRESS)
    # What a dependent call may build on.
    USABLE = (Status.SUCCEEDED, Status.DEGRADED)

    # Index diet: every index is paid on each call's insert and (status changes, so never
    # a HOT update) on its result. Unique constraints, not unique=True, so PostgreSQL gets
    # no LIKE-pattern twin it would never use.
    call_id = models.CharField(max_length=40)
    # Covered by the (run, tool_call_id) and (run, created_at) indexes.
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="calls", db_index=False)
    tool_call_id = models.CharField(max_length=128)
    step_index = models.PositiveIntegerField()
    tool = models.CharField(max_length=128)
    args = models.JSONField(null=True, blank=True)
    args_digest = models.CharField(max_length=64)
    idempotency_key = models.CharField(max_length=64, blank=True, default="")
    client_reference = models.CharField(max_length=64, blank=True, default="")
    depends_on = models.JSONField(default=list, blank=True)
    tokens = models.PositiveBigIntegerField(default=0)
    status = models.CharField(max_length=24, choices=Status.choices)
    result = models.JSONField(null=True, blank=True)
    error_class = models.CharField(max_length=16, choices=ErrorClass.choices, blank=True)
    error_reason = models.CharField(max_length=24, choices=Reason.choices, blank=True)
    error_message = models.TextField(blank=True, default="")
    feedback = models.TextField(blank=True, default="")
    attempts = models.PositiveIntegerField(default=0)
    span_id = models.CharField(max_length=16, default=new_span_id)
    # The call's span: in its run's trace unless `trace_id` names another (a
    # compensation's trace of its own); a child of the agent's span when its request
    # carried a `traceparent` of that trace; `link` ("<trace_id>-<span_id>") is the span
    # a compensation's span links to, the call it undoes.
    trace_id = models.CharField(max_length=32, blank=True, default="")
    parent_span_id = models.CharField(max_length=16, blank=True, default="")
    link = models.CharField(max_length=49, blank=True, default="")
    # The full result, encrypted, when the stored `result` had something redacted.
    result_sealed = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)
    # Unknown outcomes: the worker asks the query tool again at next_reconcile_at.
    reconcile_attempts = models.PositiveIntegerField(default=0)
    next_reconcile_at = models.DateTimeField(null=True, blank=True)
    settled_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        db_index=False,
        help_text="The person who settled an unknown outcome by hand.",
    )
    settle_note = models.TextField(blank=True, default="")
    # An undo call is the worker's, not the agent's: it is not one of the run's calls in
    # the API, its summary or its budget (compensations/ owns it).
    role = models.CharField(max_length=8, choices=Role.choices, default=Role.CALL)
    # Set when the call waited (or waits) for a person; null on every other call, so the
    # API answers those without a look at the approvals table.
    approval = models.OneToOneField(
        "toolops.Approval",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="call",
    )

    # The agent policy's word on it (API.md "Agent policy"): the version in force when it
    # was admitted (null: none was), the rules that decided ([rule, action], log_only
    # ones as "would_<action>"; null: none), and the spend it reserved
    # ([limit, period, currency, units]; given back if it ends not done).
    policy_version = models.PositiveIntegerField(null=True, blank=True)
    policy_rules = models.JSONField(null=True, blank=True)
    policy_holds = models.JSONField(null=True, blank=True)

    objects = ToolCallQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["run", "tool_call_id"], name="call_run_tool_call_id"),
            models.UniqueConstraint(fields=["call_id"], name="call_call_id_unique"),
        ]
        indexes = [
            models.Index(fields=["run", "created_at"]),
            # In pattern order: the console's runs filter matches a tool_call_id's start
            # (LIKE 'q%'), which a B-tree in the database's collation cannot serve; one in
            # pattern order answers equality too, so it is the only index on the column.
            models.Index(
                fields=["tool_call_id"], name="call_tool_call_id", opclasses=["varchar_pattern_ops"]
            ),
            models.Index(fields=["status", "next_reconcile_at"]),
            # The retention purge asks whether any call still refers to a sealed args row:
            # by call_id, which call_call_id_unique answers (no index of its own).
        ]

    def __str__(self) -> str:
        return f"{self.tool} ({self.tool_call_id})"

    @property
    def is_waiting(self) -> bool:
        return self.status in self.WAITING

    @property
    def error(self) -> dict[str, str] | None:
        if not self.error_class and not self.error_reason:
            return None
        return {
            "class": self.error_class,
            "reason": self.error_reason,
            "message": self.error_message,
        }


class Attempt(models.Model):
    """One real request to a downstream: a child span of its call, never overwritten."""

    class Health(models.TextChoices):
        """What the attempt says about the downstream's health, for its breaker."""

        SUCCESS = "success"
        FAILURE = "failure"  # 5xx, 429, timeout, reset, refused
        NEUTRAL = "neutral"  # other 4xx: the request was wrong, not the tool

    # Covered by the (call, number) index.
    call = models.ForeignKey(
        ToolCall, on_delete=models.CASCADE, related_name="attempt_rows", db_index=False
    )
    tool = models.CharField(max_length=128, default="")
    health = models.CharField(max_length=8, choices=Health.choices, default=Health.NEUTRAL)
    number = models.PositiveIntegerField()
    span_id = models.CharField(max_length=16)
    started_at = models.DateTimeField()
    duration_ms = models.FloatField()
    waited_ms = models.FloatField(default=0, help_text="Backoff slept before this attempt.")
    http_status = models.PositiveIntegerField(null=True, blank=True)
    outcome = models.CharField(max_length=16, help_text="ok, or the failure class.")
    reason = models.CharField(max_length=24, blank=True)
    error = models.TextField(blank=True, default="")
    downstream_request_id = models.CharField(max_length=128, blank=True, default="")
    purpose = models.CharField(max_length=16, default="call", help_text="call or reconcile.")

    class Meta:
        ordering = ["call", "number"]
        indexes = [
            models.Index(fields=["call", "number"]),
            # The breaker's sliding window: a tool's attempts since a moment.
            models.Index(fields=["tool", "started_at"]),
        ]

    def __str__(self) -> str:
        return f"attempt {self.number} of {self.call_id}"


class IdempotencyRecord(models.Model):
    """Claim → execute → record. The unique key decides which request may call the
    downstream; `fence` grows on each takeover so a holder that lost its lease can no
    longer record."""

    class State(models.TextChoices):
        CLAIMED = "claimed"
        RECORDED = "recorded"

    key = models.CharField(max_length=64)
    # The public call_id, not a foreign key: the claim is inserted before its call row,
    # in the same transaction, so that a lost claim writes nothing at all.
    call_ref = models.CharField(max_length=40)
    tool = models.CharField(max_length=128)
    state = models.CharField(max_length=16, choices=State.choices, default=State.CLAIMED)
    fence = models.PositiveIntegerField(default=1)
    lease_until = models.DateTimeField()
    created_at = models.DateTimeField(default=timezone.now)
    recorded_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField()

    class Meta:
        indexes = [
            # The sweep's look for expired leases: open claims only.
            models.Index(
                fields=["lease_until"], condition=models.Q(state="claimed"), name="claim_open_lease"
            ),
            models.Index(fields=["expires_at"]),
        ]
        constraints = [models.UniqueConstraint(fields=["key"], name="idempotency_key_unique")]

    def __str__(self) -> str:
        return self.key


class ToolPolicy(models.Model):
    """Operator overrides of a tool's catalog defaults; empty fields keep the default."""

    tool = models.CharField(max_length=64, unique=True)
    timeout_s = models.FloatField(null=True, blank=True)
    max_attempts = models.PositiveIntegerField(null=True, blank=True)
    backoff_base_s = models.FloatField(null=True, blank=True)
    backoff_cap_s = models.FloatField(null=True, blank=True)
    requires_approval = models.BooleanField(null=True, blank=True)
    query_before_write = models.BooleanField(
        null=True, blank=True, help_text="Ask the query tool before the first attempt."
    )
    approval_ttl_s = models.PositiveIntegerField(null=True, blank=True)
    session_dedupe_window_s = models.PositiveIntegerField(null=True, blank=True)
    approvals_required = models.PositiveSmallIntegerField(
        null=True, blank=True, help_text="Distinct reviewers who must approve (1 or 2)."
    )
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name_plural = "tool policies"

    def __str__(self) -> str:
        return f"policy for {self.tool}"


class CircuitBreaker(models.Model):
    """One tool's breaker, shared by every web and worker process through this row."""

    class State(models.TextChoices):
        CLOSED = "closed"
        OPEN = "open"
        HALF_OPEN = "half_open"

    tool = models.CharField(max_length=128, unique=True)
    state = models.CharField(max_length=12, choices=State.choices, default=State.CLOSED)
    consecutive_failures = models.PositiveIntegerField(default=0)
    opened_at = models.DateTimeField(null=True, blank=True)
    open_until = models.DateTimeField(null=True, blank=True)
    probe_until = models.DateTimeField(null=True, blank=True)
    forced = models.BooleanField(default=False, help_text="Held open by an operator.")
    reason = models.CharField(max_length=200, blank=True, default="")
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.tool}: {self.state}"


class McpSession(models.Model):
    """An MCP session while it lives, shared by every web process: any of them serves
    it (toolops/mcp/sessions.py). The row goes when the session ends (DELETE, idle), so
    the one process whose delete removed it completes the session's run."""

    session_id = models.CharField(max_length=64, primary_key=True)
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="mcp_sessions")
    # Negotiated by the handshake; "" until the initialize request is answered.
    protocol_version = models.CharField(max_length=16, blank=True, default="")
    opened_at = models.DateTimeField()
    # The database's clock, by whichever process served the session last: idle is
    # judged from it, across processes.
    last_seen_at = models.DateTimeField(db_index=True)

    def __str__(self) -> str:
        return self.session_id


__all__ = [
    "Agent",
    "Approval",
    "ApprovalVote",
    "Attempt",
    "AuditEntry",
    "CircuitBreaker",
    "IdempotencyRecord",
    "McpSession",
    "NotificationDelivery",
    "NotificationEvent",
    "NotificationPreference",
    "PolicyVersion",
    "RateWindow",
    "Run",
    "SpendCounter",
    "ToolCall",
    "ToolPolicy",
    "new_span_id",
    "new_trace_id",
]
