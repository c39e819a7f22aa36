"""Response bodies, built as plain dicts on the hot path; the serializers below describe
the same shapes for the OpenAPI schema. Formatting only: nothing here writes."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from rest_framework import serializers

from compensations.selectors import run_compensations
from toolops import executor, selectors
from toolops.models import Approval, Run, ToolCall
from toolops.policy.verdict import names as policy_names
from toolops.summary import last_succeeded, run_summary, summary_text
from traces import services as traces

from .bounds import MAX_ATTEMPTS_MAX, MAX_SECONDS_MAX, MAX_TOKENS_MAX
from .fields import SecondsField, WholeNumberField


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
        "feedback": executor.result_unavailable_feedback(call.tool) if problem else call.feedback,
        "attempts": call.attempts,
        "replayed": replayed,
        # Only a call that waited for a person has one: no look-up for any other.
        "approval": approval_out(call.approval) if call.approval_id else None,
        # API.md "Agent policy": null when no policy was in force.
        "policy": policy_out(call),
        "created_at": iso(call.created_at),
        "finished_at": iso(call.finished_at),
    }
    if problem:
        out["result_error"] = problem.reason
    return out


def approval_out(approval: Approval | None) -> dict[str, Any] | None:
    """The `approval` object of a call (API.md)."""
    if approval is None:
        return None
    # A relation whose id is null reads as None without a query.
    duplicate_of, decided_by = approval.duplicate_of, approval.decided_by
    return {
        "approval_id": approval.approval_id,
        "status": approval.status,
        "reason": approval.reason,
        "duplicate_of": duplicate_of.call_id if duplicate_of is not None else None,
        "url": f"/console/approvals/{approval.approval_id}/",
        "expires_at": iso(approval.expires_at),
        "decided_by": decided_by.get_username() if decided_by is not None else None,
        "note": approval.note or None,
        # Held by the agent policy: the rule (or limit) that asked, and its version.
        "rule": approval.rule or None,
        "policy_version": approval.policy_version,
    }


def policy_out(call: ToolCall) -> dict[str, Any] | None:
    """The call object's `policy`: the version in force and the rules that decided."""
    if call.policy_version is None:
        return None
    return {"version": call.policy_version, "rules": policy_names(call.policy_rules)}


def run_out(run: Run, *, calls_after: str | None = None) -> dict[str, Any]:
    """The run with at most its first 1,000 calls in step order (API.md), or the 1,000
    after the call `calls_after` names (selectors.UnknownCursor when none). Its usage,
    summary and last success always speak of the whole run: computed from the calls when
    they are all here, else by the database (a constant number of queries either way).
    Reads only: the run's deadline was looked at when it was read (services)."""
    page = selectors.run_calls_page(run=run, after=calls_after)
    calls = page.calls
    for call in calls:
        call.run = run  # spare one query per call in call_out
    if page.whole:
        total = len(calls)
        attempts, tokens = sum(c.attempts for c in calls), sum(c.tokens for c in calls)
        last_ok, summary = last_succeeded(calls), run_summary(calls)
    else:
        tally = selectors.run_calls_tally(run=run)
        total, attempts, tokens = tally.total, tally.attempts, tally.tokens
        last_ok = tally.last_succeeded
        summary = summary_text(
            total=tally.total,
            ok=tally.ok,
            problems=tally.problems,
            problems_total=tally.problems_total,
            waiting=tally.waiting,
        )
    limited = run.has_limits
    out: dict[str, Any] = {
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
            "attempts": run.attempts_used if limited else attempts,
            "seconds": round(run.seconds_used(), 3),
            "tokens": run.tokens_used if limited else tokens,
        },
        "last_succeeded_tool_call_id": last_ok,
        "summary": summary,
        "calls": [call_out(c) for c in calls],
        "compensations": run_compensations(run=run) if total else [],
        "created_at": iso(run.created_at),
        "ended_at": iso(run.ended_at),
    }
    if not page.whole:
        # Only a run whose `calls` are not all of them says so; the next page's URL is a
        # path on this server, like an approval's `url`.
        out["calls_total"] = total
        out["calls_next"] = (
            f"/api/v1/runs/{run.run_id}?calls_after={page.next_after}" if page.next_after else None
        )
    return out


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
    rule = serializers.CharField(allow_null=True)
    policy_version = serializers.IntegerField(allow_null=True)


class PolicyRecordSchema(serializers.Serializer):
    version = serializers.IntegerField()
    rules = serializers.ListField(child=serializers.CharField())


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
    policy = PolicyRecordSchema(allow_null=True)
    created_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)


class BudgetSchema(serializers.Serializer):
    """A run's budget; also the run body's `budget`, so its bounds are those the run's
    columns hold (bounds.py)."""

    max_attempts = WholeNumberField(
        min_value=1, max_value=MAX_ATTEMPTS_MAX, allow_null=True, required=False
    )
    max_seconds = SecondsField(
        min_value=0.001, max_value=MAX_SECONDS_MAX, allow_null=True, required=False
    )
    max_tokens = WholeNumberField(
        min_value=0, max_value=MAX_TOKENS_MAX, allow_null=True, required=False
    )


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
        ]
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
    calls = CallSchema(many=True, help_text="At most the first 1,000 calls, in step order.")
    # Only when `calls` are not all of the run's calls (API.md).
    calls_total = serializers.IntegerField(
        required=False, help_text="How many calls the run has; only when `calls` lacks some."
    )
    calls_next = serializers.CharField(
        required=False,
        allow_null=True,
        help_text="The URL of the next 1,000 calls (`?calls_after=<call_id>`); null on the "
        "last page; only when `calls` lacks some.",
    )
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
