"""Response bodies, built as plain dicts on the hot path; the serializers below describe
the same shapes for the OpenAPI schema."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from rest_framework import serializers

from toolops.approvals.services import approval_out
from toolops.executor import feedback
from toolops.executor.pipeline import run_check_deadline
from toolops.models import Run, ToolCall
from toolops.summary import last_succeeded, run_summary
from traces import services as traces


def iso(value: datetime | None) -> str | None:
    if value is None:
        return None
    return value.isoformat().replace("+00:00", "Z")


def call_out(call: ToolCall, *, replayed: bool = False) -> dict[str, Any]:
    """The agent's view of its call. Its result is whole (the agent's own data; stored
    redacted, it is opened from `result_sealed`); the call carries no args, and its error
    message and feedback are the redacted ones everybody sees.

    A result that cannot be decrypted is never given redacted, as if it were the real one:
    `result` is null, `result_error` says why, and the feedback tells the model the call's
    status stands (a model that read "failed" or an empty result might send it again)."""
    result, problem = traces.result_read(call)
    out: dict[str, Any] = {
        "call_id": call.call_id,
        "tool_call_id": call.tool_call_id,
        "run_id": call.run.run_id,
        "step_index": call.step_index,
        "tool": call.tool,
        "status": call.status,
        "result": None if problem else result,
        "error": call.error,
        "feedback": feedback.result_unavailable(call.tool) if problem else call.feedback,
        "attempts": call.attempts,
        "replayed": replayed,
        # Only a call that waited for a person has one: no look-up for any other.
        "approval": approval_out(call.approval) if call.approval_id else None,
        "created_at": iso(call.created_at),
        "finished_at": iso(call.finished_at),
    }
    if problem:
        out["result_error"] = problem.reason
    return out


def run_out(run: Run) -> dict[str, Any]:
    from compensations.selectors import run_compensations

    run_check_deadline(run)
    calls = list(
        run.calls.agent_calls()
        .select_related("approval__decided_by", "approval__duplicate_of")
        .order_by("created_at", "pk")
    )
    for call in calls:
        call.run = run  # spare one query per call in call_out
    limited = run.has_limits
    return {
        "run_id": run.run_id,
        "trace_id": run.trace_id,
        "session_key": run.session_key,
        "status": run.status,
        "budget": {
            "max_attempts": run.max_attempts,
            "max_seconds": run.max_seconds,
            "max_tokens": run.max_tokens,
        },
        "usage": {
            "attempts": run.attempts_used if limited else sum(c.attempts for c in calls),
            "seconds": round(run.seconds_used(), 3),
            "tokens": run.tokens_used if limited else sum(c.tokens for c in calls),
        },
        "last_succeeded_tool_call_id": last_succeeded(calls),
        "summary": run_summary(calls),
        "calls": [call_out(c) for c in calls],
        "compensations": run_compensations(run=run) if calls else [],
        "created_at": iso(run.created_at),
        "ended_at": iso(run.ended_at),
    }


# -- schema-only serializers ---------------------------------------------------------


class ErrorSchema(serializers.Serializer):
    class_ = serializers.ChoiceField(choices=ToolCall.ErrorClass.choices)
    reason = serializers.ChoiceField(choices=ToolCall.Reason.choices)
    message = serializers.CharField()

    def get_fields(self) -> dict[str, Any]:
        fields = super().get_fields()
        fields["class"] = fields.pop("class_")
        return fields


class ApprovalSchema(serializers.Serializer):
    approval_id = serializers.CharField()
    status = serializers.ChoiceField(choices=["pending", "approved", "rejected", "expired"])
    reason = serializers.ChoiceField(choices=["irreversible", "policy", "possible_duplicate"])
    duplicate_of = serializers.CharField(allow_null=True)
    url = serializers.CharField()
    expires_at = serializers.DateTimeField()
    decided_by = serializers.CharField(allow_null=True)
    note = serializers.CharField(allow_null=True)


class CallSchema(serializers.Serializer):
    call_id = serializers.CharField()
    tool_call_id = serializers.CharField()
    run_id = serializers.CharField()
    step_index = serializers.IntegerField(min_value=0)
    tool = serializers.CharField()
    status = serializers.ChoiceField(choices=ToolCall.Status.choices)
    result = serializers.JSONField(allow_null=True)
    # Only when the result could not be decrypted (`result` is then null): why.
    result_error = serializers.CharField(required=False)
    error = ErrorSchema(allow_null=True)
    feedback = serializers.CharField()
    attempts = serializers.IntegerField()
    replayed = serializers.BooleanField()
    approval = ApprovalSchema(allow_null=True)
    created_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)


class BudgetSchema(serializers.Serializer):
    max_attempts = serializers.IntegerField(min_value=1, allow_null=True, required=False)
    max_seconds = serializers.FloatField(min_value=0.001, allow_null=True, required=False)
    max_tokens = serializers.IntegerField(min_value=0, allow_null=True, required=False)


class UsageSchema(serializers.Serializer):
    attempts = serializers.IntegerField()
    seconds = serializers.FloatField()
    tokens = serializers.IntegerField()


class CompensationSchema(serializers.Serializer):
    tool = serializers.CharField()
    status = serializers.ChoiceField(
        choices=[
            "registered",
            "discarded",
            "pending",
            "running",
            "succeeded",
            "dead_lettered",
            "resolved",
        ]  # fmt: skip
    )
    for_tool_call_id = serializers.CharField()


class RunSchema(serializers.Serializer):
    run_id = serializers.CharField()
    trace_id = serializers.CharField()
    session_key = serializers.CharField(allow_null=True)
    status = serializers.ChoiceField(choices=Run.Status.choices)
    budget = BudgetSchema()
    usage = UsageSchema()
    last_succeeded_tool_call_id = serializers.CharField(allow_null=True)
    summary = serializers.CharField()
    calls = CallSchema(many=True)
    compensations = CompensationSchema(many=True)
    created_at = serializers.DateTimeField()
    ended_at = serializers.DateTimeField(allow_null=True)


class ToolSchema(serializers.Serializer):
    name = serializers.CharField()
    description = serializers.CharField()
    kind = serializers.ChoiceField(
        choices=["read", "idempotent_write", "compensable_write", "irreversible"]
    )
    params_schema = serializers.JSONField()
    requires_approval = serializers.BooleanField()
    compensation = serializers.CharField(allow_null=True)
    query = serializers.CharField(allow_null=True)
    available = serializers.BooleanField()
    available_at = serializers.DateTimeField(allow_null=True)


class ToolListSchema(serializers.Serializer):
    tools = ToolSchema(many=True)


class ProblemSchema(serializers.Serializer):
    type = serializers.CharField()
    title = serializers.CharField()
    status = serializers.IntegerField()
    detail = serializers.CharField()
