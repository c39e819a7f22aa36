"""Writes that touch several models, a transaction or the network."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.http import Http404
from django.utils import timezone

from toolops import executor, selectors
from toolops.approvals import services as approval_services
from toolops.audit.services import Action, audit_record
from toolops.executor import CallAnswer, CallRequest
from toolops.models import Agent, CircuitBreaker, Run, ToolCall, ToolPolicy, new_trace_id
from traces import services as traces

if TYPE_CHECKING:
    from django.contrib.auth.models import User

__all__ = [
    "CallAnswer",
    "CallRequest",
    "RunEndingConflict",
    "agent_create",
    "call_create",
    "run_abort",
    "run_complete",
    "run_create",
    "run_for_agent",
]


class RunEndingConflict(Exception):
    pass


def agent_create(
    *,
    name: str,
    rate_limit_per_minute: int | None = None,
    owner: Any = None,
    by: Any = None,
    via: str = "",
) -> tuple[Agent, str]:
    """A new agent and its token (returned once, never stored), audited together. `by`:
    the person, None from a shell; `via`: what made it (e.g. "manage.py create_agent");
    `owner`: the person the agent acts for, who may not approve its calls."""
    agent = Agent(name=name, rate_limit_per_minute=rate_limit_per_minute, owner=owner)
    token = agent.set_new_token()
    with transaction.atomic():
        agent.save()
        audit_record(
            actor=by,
            action=Action.TOKEN_CREATE,
            obj=agent,
            detail={"agent": agent.name, "hint": agent.token_hint, "via": via},
            summary=f"Created agent {agent.name} and its token ({agent.token_hint}…)"
            + (f" via {via}" if via else ""),
        )
    return agent, token


def agent_rate_limit_set(*, agent: Agent, per_minute: int | None, by: User) -> Agent:
    """An operator's change of an agent's per-minute limit (None: no limit), audited
    together. Every process applies it within AGENT_CACHE_S."""
    before = agent.rate_limit_per_minute
    with transaction.atomic():
        agent.rate_limit_per_minute = per_minute
        agent.save(update_fields=["rate_limit_per_minute"])
        audit_record(
            actor=by,
            action=Action.AGENT_RATE_LIMIT,
            obj=agent,
            detail={"agent": agent.name, "before": before, "after": per_minute},
            summary=f"Rate limit of agent {agent.name}: "
            f"{before or 'none'} → {per_minute or 'none'} a minute",
        )
    return agent


def run_create(
    *,
    agent: Agent,
    run_id: str | None,
    trace_id: str | None,
    session_key: str | None,
    budget: dict[str, Any] | None,
    metadata: dict[str, Any] | None,
) -> tuple[Run, bool]:
    """Create a run, or return the agent's existing run with that id (a crashed agent
    resumes). Returns (run, created)."""
    if run_id:
        existing = Run.objects.filter(agent=agent, run_id=run_id).first()
        if existing is not None:
            executor.check_deadline(existing)
            return existing, False
    budget = budget or {}
    run = Run(
        agent=agent,
        run_id=run_id or f"r-{uuid.uuid4().hex}",
        trace_id=trace_id or new_trace_id(),
        session_key=session_key,
        max_attempts=budget.get("max_attempts", settings.TOOLOPS_DEFAULT_MAX_ATTEMPTS),
        max_seconds=budget.get("max_seconds", settings.TOOLOPS_DEFAULT_MAX_SECONDS),
        max_tokens=budget.get("max_tokens", settings.TOOLOPS_DEFAULT_MAX_TOKENS),
        # The agent's own notes, which nothing reads back for its values: stored redacted,
        # by key names and patterns, with no original kept (docs/sensitive-data.md).
        metadata=traces.redact(metadata) if metadata else {},
    )
    try:
        with transaction.atomic():
            run.save(force_insert=True)
    except IntegrityError:
        # Two creates raced on one run_id: the loser resumes the winner's run.
        return Run.objects.get(agent=agent, run_id=run.run_id), False
    return run, True


def run_for_agent(*, agent: Agent, run_id: str) -> Run:
    """The agent's own run (another agent's, a missing or a malformed id → 404), as
    anyone looking at it finds it: past its max_seconds, it is budget_exhausted now."""
    run = selectors.run_get_for_agent(agent=agent, run_id=run_id)
    executor.check_deadline(run)
    return run


def call_create(*, agent: Agent, run_id: str, request: CallRequest) -> CallAnswer:
    """A call in the agent's run, as `POST /runs/{run_id}/calls` makes it (the API and
    the MCP server): prepared, its run read in one query with all the call needs of it
    (a replay needs no other), then the executor's path. The answer's call has its run
    attached."""
    selectors.check_id(run_id, "run")
    prepared = executor.prepare(request, agent_id=agent.pk, run_id=run_id)
    context = executor.read_context(agent=agent, run_id=run_id, request=request, prepared=prepared)
    if context is None:
        raise Http404("no such run")
    return executor.submit(context, request, prepared)


def run_complete(*, run: Run) -> Run:
    """Complete a run; its registered compensations are discarded, in the same
    transaction."""
    if run.status == Run.Status.COMPLETED:
        return run
    if run.status not in (Run.Status.RUNNING, Run.Status.BUDGET_EXHAUSTED):
        raise RunEndingConflict(f"run {run.run_id} is {run.status}; it cannot be completed")
    with transaction.atomic():
        changed = Run.objects.filter(
            pk=run.pk, status__in=[Run.Status.RUNNING, Run.Status.BUDGET_EXHAUSTED]
        ).update(status=Run.Status.COMPLETED, ended_at=timezone.now())
        if changed:
            traces.run_changed(run_pk=run.pk)
            executor.compensations_discard(run_pks=[run.pk])
            # A completed run takes no more calls: what waits for a person ends too.
            approval_services.approvals_end_for_run(run=run, note="run completed")
    run.refresh_from_db()
    if not changed and run.status != Run.Status.COMPLETED:
        raise RunEndingConflict(f"run {run.run_id} is {run.status}; it cannot be completed")
    return run


ABORT_STATES = Run.ABORT_STATES


def run_abort(*, run: Run, reason: str) -> Run:
    """Abort a run: `aborting` while the worker runs its compensations, newest first
    (enqueued when this commits); `aborted` at once when it has none."""
    if run.status in ABORT_STATES:
        return run
    if run.status not in (Run.Status.RUNNING, Run.Status.BUDGET_EXHAUSTED):
        raise RunEndingConflict(f"run {run.run_id} is {run.status}; it cannot be aborted")
    # Shown on the run's page and to the agent: no e-mail addresses or card numbers.
    reason = traces.redact_text(reason)
    with transaction.atomic():
        changed = Run.objects.filter(
            pk=run.pk, status__in=[Run.Status.RUNNING, Run.Status.BUDGET_EXHAUSTED]
        ).update(status=Run.Status.ABORTING, end_reason=reason[:2000])
        if changed:
            traces.run_changed(run_pk=run.pk)
            # Calls still waiting for a person become `rejected` (API.md).
            approval_services.approvals_end_for_run(run=run, note="run aborted")
        if changed and not executor.compensations_start(run=run):
            Run.objects.filter(pk=run.pk).update(status=Run.Status.ABORTED, ended_at=timezone.now())
    run.refresh_from_db()
    if not changed and run.status not in ABORT_STATES:
        raise RunEndingConflict(f"run {run.run_id} is {run.status}; it cannot be aborted")
    return run


def run_abort_audited(*, run: Run, reason: str, by: User) -> Run:
    """An operator aborts a run from the console; audited with the abort, together."""
    with transaction.atomic():
        before = run.status
        run = run_abort(run=run, reason=reason)
        if before != run.status:
            said = traces.redact_text(reason)
            audit_record(
                actor=by,
                action=Action.RUN_ABORT,
                obj=run,
                detail={"from": before, "to": run.status, "reason": said},
                summary=f"Aborted ({before} → {run.status}): {said}",
            )
    return run


# -- console writes, each audited (toolops/audit/) in the same transaction ----------------


def tool_policy_save(*, policy: ToolPolicy, by: User, changes: str) -> ToolPolicy:
    """Save an operator's overrides and audit them, together."""
    adding = policy._state.adding
    with transaction.atomic():
        policy.updated_by = by
        policy.save()
        audit_record(
            actor=by,
            action=Action.POLICY_EDIT,
            obj=policy,
            detail={"created": adding, "changes": changes},
            summary=changes,
        )
    return policy


def call_settle_audited(
    *,
    call: ToolCall,
    by: User,
    succeeded: bool,
    note: str,
    result: Any,
    audit_text: str,
) -> bool:
    """Settle an unknown outcome through the executor and audit it, together. False, with
    nothing written, when a person or the worker settled it first."""
    with transaction.atomic():
        settled = executor.call_settle(
            call=call, by=by, succeeded=succeeded, note=note, result=result
        )
        if settled:
            audit_record(
                actor=by,
                action=Action.CALL_SETTLE,
                obj=call,
                summary=traces.redact_text(audit_text, call=call),
                detail={
                    "succeeded": succeeded,
                    "with_result": result is not None,
                    "note": traces.redact_text(note, call=call),
                },
            )
    return settled


def breaker_force_open_audited(*, tool: str, minutes: int, reason: str, by: User) -> CircuitBreaker:
    """Hold the breaker open through the executor and audit it, together."""
    with transaction.atomic():
        # force_open creates the row when the breaker never tripped.
        executor.breaker_force_open(tool=tool, seconds=minutes * 60, reason=reason)
        row = CircuitBreaker.objects.get(tool=tool)
        audit_record(
            actor=by,
            action=Action.BREAKER_FORCE_OPEN,
            obj=row,
            detail={"minutes": minutes, "reason": reason},
            summary=f"Forced open for {minutes} min. Reason: {reason}",
        )
    return row


def breaker_reset_audited(*, tool: str, by: User) -> CircuitBreaker | None:
    """Close the breaker through the executor and audit it, together. None: no row, so the
    breaker never tripped or counted a failure and there is nothing to reset."""
    with transaction.atomic():
        # Locked, so the audit's "before" is what the reset replaced.
        row = CircuitBreaker.objects.select_for_update().filter(tool=tool).first()
        if row is None:
            return None
        before = f"{row.state}{' (forced)' if row.forced else ''}"
        failures = row.consecutive_failures
        executor.breaker_reset(tool=tool)
        audit_record(
            actor=by,
            action=Action.BREAKER_RESET,
            obj=row,
            detail={"from": before, "consecutive_failures": failures},
            summary=f"Reset: {before} → closed; consecutive failures {failures} → 0.",
        )
    return row
