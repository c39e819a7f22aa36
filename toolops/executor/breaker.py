"""Per-tool circuit breakers whose state lives in the database, so every web and worker
process sees the same breaker (DESIGN.md "Budgets and circuit breakers").

closed → open: N consecutive failures, or a failure rate over the sliding window (with a
minimum number of attempts). open → half_open: after the cool-down, ONE request wins the
probe with a conditional UPDATE. half_open → closed on the probe's success, → open again
on its failure. Times are the database's, like the claims' leases."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar

from django.db import connection
from django.db.models import Count, DurationField, Q, Value
from django.db.models.functions import Now
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from toolops.models import Attempt, CircuitBreaker
from toolops.notify import events as notify
from toolops.tools.outcome import Failure, Outcome
from toolops.tools.spec import ToolSpec

from . import claims

State = CircuitBreaker.State
Health = Attempt.Health


@dataclass(frozen=True)
class Admission:
    allowed: bool
    probe: bool = False
    # While refused: when the tool will be tried again.
    available_at: datetime | None = None
    # Whether a success must write (to reset a failure count or close the breaker).
    dirty: bool = False


def health_of(outcome: Outcome) -> str:
    """Attempts that reached or tried to reach the downstream and failed count against
    it; a request the downstream refused as wrong (other 4xx) says nothing of its health."""
    if outcome.failure is None:
        return Health.SUCCESS
    if outcome.failure is Failure.HTTP:
        status = outcome.status or 0
        return Health.FAILURE if status >= 500 or status == 429 else Health.NEUTRAL
    if outcome.failure in (Failure.TIMEOUT, Failure.REFUSED, Failure.RESET):
        return Health.FAILURE
    return Health.NEUTRAL


@dataclass(frozen=True)
class BreakerRow:
    """A tool's breaker as `admit` reads it, with the database's verdict on its times
    (`due`: open_until has passed; `probe_lapsed`: probe_until has). `exists` is False
    when the tool has no breaker row yet (it is closed)."""

    exists: bool
    state: str = State.CLOSED
    consecutive_failures: int = 0
    open_until: datetime | None = None
    probe_until: datetime | None = None
    forced: bool = False
    due: bool = False
    probe_lapsed: bool = False

    WIDTH: ClassVar[int] = 8  # columns in `columns`

    @staticmethod
    def columns(alias: str) -> str:
        """The row's columns, for a statement that reads them along with others."""
        now = claims.now_sql()
        return (
            f"{alias}.tool, {alias}.state, {alias}.consecutive_failures, {alias}.open_until, "
            f"{alias}.probe_until, {alias}.forced, {alias}.open_until <= {now}, "
            f"{alias}.probe_until < {now}"
        )

    @classmethod
    def load(cls, values: Sequence[Any]) -> BreakerRow:
        tool, state, failures, open_until, probe_until, forced, due, lapsed = values
        if tool is None:
            return cls(exists=False)
        return cls(
            exists=True,
            state=str(state),
            consecutive_failures=int(failures),
            open_until=_as_datetime(open_until),
            probe_until=_as_datetime(probe_until),
            forced=bool(forced),
            due=bool(due),
            probe_lapsed=bool(lapsed),
        )


def read_state(tool: str) -> BreakerRow:
    # Read on every attempt: hand-written, since compiling it costs more than running it.
    sql = f"SELECT {BreakerRow.columns('b')} FROM toolops_circuitbreaker b WHERE b.tool = %s"
    with connection.cursor() as cursor:
        cursor.execute(sql, [tool])
        found = cursor.fetchone()
    return BreakerRow(exists=False) if found is None else BreakerRow.load(found)


def admit(spec: ToolSpec, known: BreakerRow | None = None) -> Admission:
    """May an attempt go out? `known`: the breaker as just read with the run (the first
    attempt of a call, context.py), to spare a round trip; None: read it now."""
    row = read_state(spec.name) if known is None else known
    if not row.exists or row.state == State.CLOSED:
        return Admission(allowed=True, dirty=bool(row.consecutive_failures))
    if row.forced:
        if not row.due:
            return Admission(allowed=False, available_at=row.open_until)
        # An operator's hold has run out: closed again, as if reset.
        CircuitBreaker.objects.filter(tool=spec.name, forced=True, open_until__lte=Now()).update(
            state=State.CLOSED,
            forced=False,
            consecutive_failures=0,
            open_until=None,
            probe_until=None,
            reason="",
        )
        return Admission(allowed=True)
    if row.state == State.OPEN and row.due:
        won = CircuitBreaker.objects.filter(
            tool=spec.name, state=State.OPEN, forced=False, open_until__lte=Now()
        ).update(state=State.HALF_OPEN, probe_until=Now() + _seconds(_probe_lease(spec)))
        if won == 1:
            return Admission(allowed=True, probe=True, dirty=True)
    elif row.state == State.HALF_OPEN and row.probe_lapsed:
        # The probe's holder died without reporting: the next request probes instead.
        won = CircuitBreaker.objects.filter(
            tool=spec.name, state=State.HALF_OPEN, probe_until__lt=Now()
        ).update(probe_until=Now() + _seconds(_probe_lease(spec)))
        if won == 1:
            return Admission(allowed=True, probe=True, dirty=True)
    until = row.open_until if row.state == State.OPEN else row.probe_until
    return Admission(allowed=False, available_at=until)


def report(spec: ToolSpec, admission: Admission, health: str) -> None:
    """Record one attempt's health: reset the failure count, or count a failure and trip
    the breaker when a threshold is passed. The next attempt is admitted afresh."""
    if health == Health.SUCCESS:
        if admission.dirty:
            CircuitBreaker.objects.filter(tool=spec.name, forced=False).update(
                state=State.CLOSED,
                consecutive_failures=0,
                open_until=None,
                probe_until=None,
                reason="",
            )
        return
    if health != Health.FAILURE:
        return
    config = spec.breaker
    if admission.probe:
        _trip(spec, "the half-open probe failed", from_states=(State.HALF_OPEN,))
        return
    failures = _count_failure(spec.name)
    if failures >= config.consecutive_failures:
        _trip(spec, f"{failures} consecutive failures")
        return
    rate = _window_rate(spec)
    if rate is not None:
        _trip(spec, f"{rate:.0%} of attempts failed in the last {config.window_s:g} s")


def _count_failure(tool: str) -> int:
    sql = (
        "INSERT INTO toolops_circuitbreaker (tool, state, consecutive_failures, forced, reason, "
        "updated_at) VALUES (%s, 'closed', 1, false, '', %s) ON CONFLICT (tool) DO UPDATE SET "
        "consecutive_failures = toolops_circuitbreaker.consecutive_failures + 1, "
        "updated_at = EXCLUDED.updated_at RETURNING consecutive_failures"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [tool, timezone.now()])
        return int(cursor.fetchone()[0])


def _window_rate(spec: ToolSpec) -> float | None:
    """The window's failure rate when it passes the threshold with enough attempts."""
    config = spec.breaker
    since = timezone.now() - timedelta(seconds=config.window_s)
    counts = Attempt.objects.filter(tool=spec.name, started_at__gte=since).aggregate(
        total=Count("pk", filter=~Q(health=Health.NEUTRAL)),
        failed=Count("pk", filter=Q(health=Health.FAILURE)),
    )
    # This attempt is not recorded yet (attempts are written with the call's result).
    total, failed = counts["total"] + 1, counts["failed"] + 1
    if total < config.min_calls:
        return None
    rate = failed / total
    return rate if rate >= config.failure_rate else None


def _trip(spec: ToolSpec, reason: str, from_states: tuple[str, ...] = (State.CLOSED,)) -> None:
    tripped = CircuitBreaker.objects.filter(
        tool=spec.name, state__in=from_states, forced=False
    ).update(
        state=State.OPEN,
        opened_at=Now(),
        open_until=Now() + _seconds(spec.breaker.cooldown_s),
        probe_until=None,
        reason=reason[:200],
    )
    # Operators are told when a closed breaker opens, not of each failed probe after.
    if tripped and State.CLOSED in from_states:
        opened = CircuitBreaker.objects.filter(tool=spec.name).values_list("opened_at").first()
        notify.breaker_opened(tool=spec.name, opened_at=str(opened[0] if opened else ""))


def breaker_force_open(*, tool: str, seconds: float, reason: str) -> None:
    """An operator holds the breaker open (until reset, or for `seconds`)."""
    until = timezone.now() + timedelta(seconds=seconds)
    CircuitBreaker.objects.update_or_create(
        tool=tool,
        defaults={
            "state": State.OPEN,
            "forced": True,
            "opened_at": timezone.now(),
            "open_until": until,
            "probe_until": None,
            "reason": reason[:200],
        },
    )


def breaker_reset(*, tool: str) -> None:
    CircuitBreaker.objects.filter(tool=tool).update(
        state=State.CLOSED,
        consecutive_failures=0,
        forced=False,
        open_until=None,
        probe_until=None,
        reason="",
    )


def breaker_availability() -> dict[str, datetime | None]:
    """Tools that are not available now → when they will be tried again. An open breaker
    whose cool-down has passed is available: its next call is the probe."""
    rows = CircuitBreaker.objects.filter(
        Q(state=State.OPEN, open_until__gt=Now()) | Q(state=State.HALF_OPEN)
    ).values_list("tool", "state", "open_until", "probe_until")
    return {
        tool: open_until if state == State.OPEN else probe_until
        for tool, state, open_until, probe_until in rows
    }


def _as_datetime(value: object) -> datetime | None:
    # SQLite hands back text or naive datetimes (stored in UTC); PostgreSQL aware ones.
    if value is None:
        return None
    parsed = value if isinstance(value, datetime) else parse_datetime(str(value))
    if parsed is not None and timezone.is_naive(parsed):
        parsed = parsed.replace(tzinfo=UTC)
    return parsed


def _probe_lease(spec: ToolSpec) -> float:
    return spec.timeout_s + 5.0


def _seconds(value: float) -> Value:
    return Value(timedelta(seconds=value), output_field=DurationField())
