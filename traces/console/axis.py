"""The run's time axis: where a moment falls on it, in percent (the page's bars are
positioned spans, no chart library), and how times and durations read on the page."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, TypedDict

from toolops.models import Attempt, Run, ToolCall


class WithAttempts(TypedDict):
    """What the run page's read of a call puts on it (lanes.read_whole's Prefetch)."""

    attempt_list: list[Attempt]


if TYPE_CHECKING:
    from django_stubs_ext import WithAnnotations

    # A call read whole for the run page: its attempts come with it, oldest first.
    FullCall = WithAnnotations[ToolCall, WithAttempts]

# A bar narrower than this would vanish; it is drawn this wide, its real length in words.
MIN_WIDTH = 0.4


@dataclass(frozen=True)
class Span:
    """A stretch of the run's time axis, in percent of it."""

    left: float
    width: float

    # Placed by console.js from data-left / data-width (percent): a style attribute would
    # need 'unsafe-inline' in the CSP (settings.CONTENT_SECURITY_POLICY).
    @property
    def left_pct(self) -> str:
        return f"{self.left:.2f}"

    @property
    def width_pct(self) -> str:
        return f"{self.width:.2f}"


@dataclass(frozen=True)
class Axis:
    start: datetime
    end: datetime

    @property
    def ms(self) -> float:
        return max((self.end - self.start).total_seconds() * 1000, 1.0)

    def span(self, begin: datetime, end: datetime) -> Span:
        left = (begin - self.start).total_seconds() * 1000 / self.ms * 100
        left = min(max(left, 0.0), 100.0 - MIN_WIDTH)
        width = (end - begin).total_seconds() * 1000 / self.ms * 100
        return Span(left, min(max(width, MIN_WIDTH), 100.0 - left))

    def ticks(self, count: int = 4) -> list[tuple[float, str]]:
        """(percent, "+1.2 s") at even steps, for the axis' heading."""
        return [(100 * i / count, "+" + duration(self.ms * i / count)) for i in range(count + 1)]


def duration(ms: float) -> str:
    if ms < 1000:
        return f"{ms:.0f} ms"
    if ms < 60_000:
        return f"{ms / 1000:.1f} s"
    minutes, seconds = divmod(int(ms / 1000), 60)
    return f"{minutes} min {seconds} s" if minutes < 60 else f"{minutes // 60} h {minutes % 60} min"


def stamp(moment: datetime) -> str:
    return f"{moment.astimezone(UTC):%Y-%m-%d %H:%M:%S}"


def clock(moment: datetime) -> str:
    """To the millisecond: attempts a few ms apart must read apart."""
    moment = moment.astimezone(UTC)
    return f"{moment:%H:%M:%S}.{moment.microsecond // 1000:03d}"


def run_axis(
    run: Run, light: Sequence[ToolCall], full: Iterable[FullCall], *, now: datetime, live: bool
) -> Axis:
    """From the run's start (or its first call, if earlier) to its end: `now` while the run
    can still change, else the last moment anything recorded happened (a call left open
    in an ended run, an unknown outcome say, must not stretch the axis to today). `full`:
    the calls read with their attempts."""
    start = min([run.created_at, *(c.created_at for c in light[:1])])
    if live:
        return Axis(start, max(now, start))
    moments = [run.ended_at or start]
    moments += [c.finished_at or c.created_at for c in light]
    moments += [attempt_end(a) for c in full for a in c.attempt_list]
    return Axis(start, max(moments))


def attempt_end(attempt: Attempt) -> datetime:
    return attempt.started_at + timedelta(milliseconds=attempt.duration_ms)
