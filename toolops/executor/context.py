"""What one call needs to know of its run, read in ONE query (statements/context.py): the
run, an earlier call with the request's tool_call_id, the tool's breaker, a possible
session duplicate (for the approval gate) and, for a write, its key's claim and call —
so that a replay is answered by this one query. Every later stage reads these fields
instead of asking the database again.

The session duplicate check (DESIGN.md): a write with the same tool and canonical args
as a call in ANOTHER run of the same agent and session_key, within the tool's window,
that took or may have taken effect, is held for a person (gate.py) as a possible
duplicate.

A run past its max_seconds is budget_exhausted the moment anyone looks at it: the look
is here (`check_deadline`), before any stage, never while an answer is rendered."""

from __future__ import annotations

from dataclasses import dataclass

from toolops.models import Agent, Run, ToolCall
from toolops.policy import active as policy

from .breaker import BreakerRow
from .claims import ClaimState
from .prepare import CallRequest, Prepared
from .statements import context as statement
from .statements.context import DuplicateProbe


@dataclass
class CallContext:
    """The run as one call found it. Built by `read_context` only."""

    run: Run
    # The run's call that already has the request's tool_call_id (its pk), if any.
    existing_call_pk: int | None
    # The tool's breaker, as the call's first attempt is admitted by it.
    breaker: BreakerRow | None
    # The earlier call of the session that this one may repeat (approval gate), if any.
    session_duplicate_pk: int | None
    # A write's claim and its call, when its key was claimed before: a replay.
    claim_hit: tuple[ClaimState, ToolCall] | None
    # The agent that calls, and the agent policy in force (None: there is none), whose
    # version was read with the run.
    agent: Agent | None = None
    policy: policy.Active | None = None


def read_context(
    *, agent: Agent, run_id: str, request: CallRequest, prepared: Prepared
) -> CallContext | None:
    """The agent's run `run_id` and what the call needs of it; None: the agent has no
    such run."""
    spec = prepared.spec
    row = statement.read(
        agent_id=agent.pk,
        run_id=run_id,
        tool=spec.name if spec is not None else request.tool,
        tool_call_id=request.tool_call_id,
        duplicate=_duplicate_probe(prepared),
        key=prepared.write_key,
    )
    if row is None:
        return None
    check_deadline(row.run)
    return CallContext(
        run=row.run,
        existing_call_pk=row.existing_call_pk,
        breaker=row.breaker,
        session_duplicate_pk=row.session_duplicate_pk,
        claim_hit=row.claim_hit,
        agent=agent,
        policy=policy.active(row.policy_version),
    )


def _duplicate_probe(prepared: Prepared) -> DuplicateProbe | None:
    """What the session-duplicate check looks for: only a valid write of a tool with a
    window is checked."""
    spec = prepared.spec
    if spec is None or spec.is_read or prepared.problem or not spec.session_dedupe_window_s:
        return None
    return DuplicateProbe(spec.name, prepared.digest, spec.session_dedupe_window_s)


def check_deadline(run: Run) -> None:
    """A run past max_seconds is budget_exhausted the moment anyone looks at it."""
    limit = run.max_seconds
    if run.status == Run.Status.RUNNING and limit is not None and run.seconds_used() >= limit:
        Run.objects.filter(pk=run.pk, status=Run.Status.RUNNING).update(
            status=Run.Status.BUDGET_EXHAUSTED
        )
        run.refresh_from_db(fields=["status"])
