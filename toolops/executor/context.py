"""What one call needs to know of its run, read in ONE query (DESIGN.md "The path of one
call", auth + quota → … → session duplicate check): the run itself, an earlier call with
the request's tool_call_id, the tool's breaker, an earlier call of another run of the
session with the same args (for the approval gate) and, for a write, its key's claim and
call — so that a replay is answered by this one query. Every later stage reads these
fields instead of asking the database again.

A run past its max_seconds is budget_exhausted the moment anyone looks at it: the look
is here (`check_deadline`), before any stage, never while an answer is rendered."""

from __future__ import annotations

from dataclasses import dataclass

from django.db import connection

from toolops.models import Agent, Run, ToolCall
from toolops.policy import active as policy
from toolops.rows import RowLoader

from . import breaker, claims, duplicates
from .claims import ClaimState
from .prepare import CallRequest, Prepared


@dataclass
class CallContext:
    """The run as one call found it. Built by `read_context` only."""

    run: Run
    # The run's call that already has the request's tool_call_id (its pk), if any.
    existing_call_pk: int | None
    # The tool's breaker row as `breaker.admit` takes it (None: not read, admit reads it).
    breaker_state: tuple[object, ...] | None
    # The earlier call of the session that this one may repeat (approval gate), if any.
    session_duplicate_pk: int | None
    # A write's claim and its call, when its key was claimed before: a replay.
    claim_hit: tuple[ClaimState, ToolCall] | None
    # The agent that calls, and the agent policy in force (None: there is none), whose
    # version was read with the run.
    agent: Agent | None = None
    policy: policy.Active | None = None


_runs = RowLoader(Run)


def read_context(
    *, agent: Agent, run_id: str, request: CallRequest, prepared: Prepared
) -> CallContext | None:
    """The agent's run `run_id` and what the call needs of it; None: the agent has no
    such run. Hand-written SQL: compiling this query costs more than running it."""
    spec = prepared.spec
    key = prepared.write_key
    probe = duplicates.duplicate_probe(prepared)
    existing = (
        "(SELECT c.id FROM toolops_toolcall c WHERE c.run_id = r.id AND c.tool_call_id = %s)"
        if request.tool_call_id is not None
        else "NULL"
    )
    # Parameters in the order they appear: the select list's, then the joins'.
    params: list[object] = [request.tool_call_id] if request.tool_call_id is not None else []
    columns = f", {breaker.state_sql('b')}"
    joins = "LEFT JOIN toolops_circuitbreaker b ON b.tool = %s "
    join_params: list[object] = [spec.name if spec is not None else request.tool]
    if probe is not None:
        columns += f", {duplicates.duplicate_sql('r')}"
        params.extend(duplicates.duplicate_params(*probe))
    if key is not None:
        columns += f", {claims.with_call_sql('k', 'kc')}"
        joins += (
            'LEFT JOIN toolops_idempotencyrecord k ON k."key" = %s '
            "LEFT JOIN toolops_toolcall kc ON kc.call_id = k.call_ref "
        )
        join_params.append(key)
    sql = (
        f"SELECT {_runs.columns('r')}, {policy.VERSION_SQL}, {existing}{columns} "
        f"FROM toolops_run r {joins}WHERE r.agent_id = %s AND r.run_id = %s"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [*params, *join_params, agent.pk, run_id])
        row = cursor.fetchone()
    if row is None:
        return None
    run = _runs.load(row)
    check_deadline(run)
    version, extra = row[len(_runs.fields)], row[len(_runs.fields) + 1 :]
    width = len(breaker.STATE_COLUMNS)
    existing_pk, state, extra = extra[0], tuple(extra[1 : 1 + width]), extra[1 + width :]
    duplicate = None
    if probe is not None:
        duplicate, extra = extra[0], extra[1:]
    return CallContext(
        run=run,
        existing_call_pk=existing_pk,
        breaker_state=state,
        session_duplicate_pk=duplicate,
        claim_hit=claims.with_call_from_row(extra) if key is not None else None,
        agent=agent,
        policy=policy.active(version),
    )


def check_deadline(run: Run) -> None:
    """A run past max_seconds is budget_exhausted the moment anyone looks at it."""
    limited = run.status == Run.Status.RUNNING and run.max_seconds is not None
    if limited and run.seconds_used() >= run.max_seconds:
        Run.objects.filter(pk=run.pk, status=Run.Status.RUNNING).update(
            status=Run.Status.BUDGET_EXHAUSTED
        )
        run.refresh_from_db(fields=["status"])
