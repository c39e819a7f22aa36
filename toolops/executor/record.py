"""The record (DESIGN.md: record result + register compensation, one transaction): a
call's result with its attempts, and — for a successful write that has an undo — its
compensation, in the same statement (never a success without its undo); under the
claim's fencing token, so a holder whose lease ran out cannot overwrite its successor.
Calls that ended before anything was sent (unknown tool, invalid args, a dependency, the
budget) are recorded here too."""

from __future__ import annotations

from contextlib import nullcontext

from django.db import IntegrityError, transaction

from toolops import rows
from toolops.models import ToolCall
from toolops.policy import limits as spend
from traces import services as traces

from . import register
from .budget import Budget, charge_run
from .errors import ToolCallConflict
from .execution import Execution
from .prepare import CallAnswer
from .statements.parts import is_tool_call_id_clash
from .statements.result import insert_with_attempts, record_result

# Endings that give a call's reserved spend back; `unknown` keeps it until settled.
NOT_DONE = (ToolCall.Status.FAILED, ToolCall.Status.SKIPPED, ToolCall.Status.REJECTED)
RESULT_FIELDS = [
    "status",
    "result",
    "error_class",
    "error_reason",
    "error_message",
    "feedback",
    "attempts",
    "finished_at",
    "next_reconcile_at",
    "result_sealed",
]


def record(execution: Execution, *, insert: bool) -> bool:
    """Record the result with its attempts; False when our lease ran out and someone else
    now holds this call (its answer is theirs: `execution.call` is re-read).

    Raises IntegrityError when a read's insert clashes with another call's tool_call_id."""
    call, run = execution.call, execution.run
    fence = None if execution.fence is None else (-1 if execution.lost_claim else execution.fence)
    undo = register.compensation_for(execution)
    also = [undo] if undo is not None and not undo.problem else []
    # The call's searchable values, by HMAC (traces/search.py): a tool without searchable
    # fields has none, and its record costs nothing more.
    keys = traces.search_keys(call, execution.spec) if traces.searches(execution.spec) else []
    # Counters live on the run row only for limited runs; the result's own statement
    # settles them (budget.py).
    charge = execution.budget.settlement()
    # A compensation that cannot be built and the ticket it opens are written in one
    # transaction: a rare path, where statements do not count.
    with transaction.atomic() if undo is not None and undo.problem else nullcontext():
        if insert:
            insert_with_attempts(call, execution.rows, charge=charge, keys=keys)
            recorded = True
        else:
            recorded = record_result(
                call,
                execution.rows,
                fence=fence,
                fields=RESULT_FIELDS,
                also=also,
                charge=charge,
                keys=keys,
            )
        if recorded and undo is not None and undo.problem:
            register.save_unmappable(compensation=undo)
    if recorded and call.policy_holds and call.status in NOT_DONE:
        # Ended not done: its reserved spend is free again (policy/limits.py).
        spend.give_back(run.agent_id, call.policy_holds)
    if not recorded:
        call.refresh_from_db()
        # Our attempts happened and landed; the call span is its new holder's.
        traces.attempts_export(call=call, attempts=execution.rows)
    else:
        traces.call_export(call=call, attempts=execution.rows)
    traces.run_changed(run_pk=run.pk)
    return recorded


def record_unexecuted(call: ToolCall, budget: Budget) -> CallAnswer:
    """Record a call that ended before anything was sent, with its tokens."""
    try:
        with transaction.atomic():
            rows.insert([call])
            traces.sealed_save(call)
            charge_run(call.run, attempts=0, tokens=budget.tokens)
    except IntegrityError as exc:
        if not is_tool_call_id_clash(exc):
            raise
        existing = ToolCall.objects.get(run=call.run, tool_call_id=call.tool_call_id)
        if existing.args_digest != call.args_digest or existing.tool != call.tool:
            raise ToolCallConflict(f"tool_call_id {call.tool_call_id!r} is already used") from None
        return CallAnswer(existing, replayed=True)
    traces.run_changed(run_pk=call.run_id)
    traces.call_export(call=call)
    return CallAnswer(call, replayed=False)
