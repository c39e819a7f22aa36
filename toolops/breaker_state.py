"""A breaker's state as the next call would see it: the one reading every page shows
(tool health, metrics, /metrics, the ticket's undo tool), so no two pages disagree.

The row alone says too little: an `open` row whose cool-down has passed admits its next
call as the probe (half-open), and an operator's hold that has run out closes at the
next call (executor/breaker.py `admit`). Both are judged here as there, by the
database's clock. Below the executor, so every layer can read it; the executor's face
exports it as `breaker_states`."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db.models import BooleanField, ExpressionWrapper, Q
from django.db.models.functions import Now

from toolops.models import CircuitBreaker

State = CircuitBreaker.State
# toolops_breaker_state's levels.
LEVELS = {State.CLOSED: 0, State.HALF_OPEN: 1, State.OPEN: 2}


@dataclass(frozen=True)
class BreakerState:
    tool: str
    state: str = State.CLOSED  # closed · half_open · open, as the next call sees it
    # open: when calls are tried again; half_open with a probe under way: its deadline.
    until: datetime | None = None
    forced: bool = False  # held open by an operator
    probing: bool = False  # a probe call is under way now

    @property
    def refuses(self) -> bool:
        """Would the next call be refused unsent? Open and cooling down (or held open),
        or a probe call under way; `until` says till when."""
        return self.state == State.OPEN or self.probing

    @property
    def level(self) -> int:
        return LEVELS[State(self.state)]

    @property
    def headline(self) -> str:
        return {State.CLOSED: "closed", State.HALF_OPEN: "half-open", State.OPEN: "open"}[
            State(self.state)
        ]

    @property
    def detail(self) -> str:
        """What it means for the next call; a time (`until`) follows "until"."""
        if self.state == State.OPEN:
            return "held open by an operator until" if self.forced else "cooling down until"
        if self.state == State.HALF_OPEN:
            return "a probe call is under way until" if self.probing else "the next call is a probe"
        return "calls go through"

    @property
    def label(self) -> str:
        """In one line, plain text (UTC): "open — cooling down until 12:03 UTC"."""
        if self.state == State.CLOSED:
            return "closed"
        when = f" {self.until:%H:%M} UTC" if self.until else ""
        return f"{self.headline} — {self.detail}{when}"


def breaker_states() -> dict[str, BreakerState]:
    """Every breaker row's state as the next call would see it (one query). A tool
    without a row never tripped: `breaker_state_of` answers closed for it."""
    due = ExpressionWrapper(Q(open_until__lte=Now()), output_field=BooleanField())
    lapsed = ExpressionWrapper(Q(probe_until__lt=Now()), output_field=BooleanField())
    rows = CircuitBreaker.objects.annotate(due=due, lapsed=lapsed).values_list(
        "tool", "state", "forced", "open_until", "probe_until", "due", "lapsed"
    )
    return {row[0]: _judge(*row) for row in rows}


def breaker_state_of(states: dict[str, BreakerState], tool: str) -> BreakerState:
    return states.get(tool) or BreakerState(tool)


def _judge(
    tool: str,
    state: str,
    forced: bool,
    open_until: datetime | None,
    probe_until: datetime | None,
    due: bool | None,
    lapsed: bool | None,
) -> BreakerState:
    if state == State.OPEN and forced:
        # An operator's hold that has run out closes at the next call.
        if due:
            return BreakerState(tool)
        return BreakerState(tool, State.OPEN, until=open_until, forced=True)
    if state == State.OPEN:
        if due:  # the cool-down has passed: the next call is the probe
            return BreakerState(tool, State.HALF_OPEN)
        return BreakerState(tool, State.OPEN, until=open_until)
    if state == State.HALF_OPEN:
        if lapsed or probe_until is None:  # the probe's holder died: the next call probes
            return BreakerState(tool, State.HALF_OPEN)
        return BreakerState(tool, State.HALF_OPEN, until=probe_until, probing=True)
    return BreakerState(tool)
