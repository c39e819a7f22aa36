"""The executor: the path of one tool call (DESIGN.md "The path of one call"), one module
per stage, spined by pipeline.py. This module is its face: the rest of ToolOps calls the
executor through these names only (the import contract in pyproject.toml holds every
other module of this package private to it; docs/architecture.md).

    prepare → read_context → submit      an agent's call: made, its run read, answered
    wait_for / wait_ended                waiting for a call that waits (API.md `wait`)
    call_reconcile / call_settle         unknown outcomes: the worker's look, a person
    claim_recover                        a claim whose holder died (the sweep)
    approved_call_take_up / _execute     a call a reviewer approved (the worker)
    held_call_release                    a held call that will never run
    undo_execute                         one round of a compensation (the saga worker)
    compensations_discard / _start       a run's registered undos when it ends
    breaker_states                       each breaker as the next call sees it (pages)
"""

from __future__ import annotations

from toolops.breaker_state import BreakerState, breaker_state_of, breaker_states

from .approved import approved_call_execute, approved_call_take_up
from .breaker import breaker_availability, breaker_force_open, breaker_reset
from .context import CallContext, check_deadline, read_context
from .errors import BadCallRequest, RunNotRunning, ToolCallConflict
from .feedback import result_unavailable_feedback
from .gate import held_call_release
from .pipeline import submit
from .prepare import CallAnswer, CallRequest, Prepared, prepare
from .register import compensations_discard, compensations_start, compensations_wake
from .settle import (
    RECONCILE_MAX_ATTEMPTS,
    call_reconcile,
    call_settle,
    claim_recover,
    stale_claim_keys,
    unknown_calls_due,
)
from .undo import undo_execute
from .wait import LONG_POLL_PAUSES, wait_ended, wait_for

__all__ = [
    "LONG_POLL_PAUSES",
    "RECONCILE_MAX_ATTEMPTS",
    "BadCallRequest",
    "BreakerState",
    "CallAnswer",
    "CallContext",
    "CallRequest",
    "Prepared",
    "RunNotRunning",
    "ToolCallConflict",
    "approved_call_execute",
    "approved_call_take_up",
    "breaker_availability",
    "breaker_force_open",
    "breaker_reset",
    "breaker_state_of",
    "breaker_states",
    "call_reconcile",
    "call_settle",
    "check_deadline",
    "claim_recover",
    "compensations_discard",
    "compensations_start",
    "compensations_wake",
    "held_call_release",
    "prepare",
    "read_context",
    "result_unavailable_feedback",
    "stale_claim_keys",
    "submit",
    "undo_execute",
    "unknown_calls_due",
    "wait_ended",
    "wait_for",
]
