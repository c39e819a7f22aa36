"""The metrics page's words and charts: each tool's figures (figures.py) as eight tiles,
each with its value over the chosen window, what it was made from, a chart over the
last hour and one over the last day, and a highlight (a class and a sentence, never
colour alone) where a threshold is crossed (thresholds.py)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypedDict

from traces.metrics import BREAKER_LABELS

from . import thresholds
from .figures import Tally, ToolFigures
from .sparkline import Spark, spark

WINDOWS = {"hour": "last hour", "day": "last day"}
CHARTS = {"hour": "last hour, 5-minute buckets", "day": "last day, hourly buckets"}


@dataclass
class Tile:
    key: str
    name: str
    value: str
    detail: str
    definition: str
    hour: Spark
    day: Spark
    flag: str = ""  # why it is highlighted; empty: it is not


class Charts(TypedDict):
    """A tile's two charts, spread into it (Tile.hour and Tile.day)."""

    hour: Spark
    day: Spark


@dataclass
class Card:
    figures: ToolFigures
    tiles: list[Tile]

    @property
    def flags(self) -> list[Tile]:
        return [tile for tile in self.tiles if tile.flag]


def percent(value: float) -> str:
    return f"{value * 100:.1f}%"


def ratio(value: float) -> str:
    return f"{value:.2f}×"


def duration(seconds: float) -> str:
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 60:
        return f"{seconds:.2f} s"
    if seconds < 3600:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def count(value: float) -> str:
    return f"{value:g}"


def n(count: int, noun: str) -> str:
    """A count and its noun: 1 request, 5 requests."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _or_dash(value: float | None, fmt: Callable[[float], str]) -> str:
    return "—" if value is None else fmt(value)


def _p95(tally: Tally) -> float | None:
    return tally.latency[1] if tally.latency else None


def card(figures: ToolFigures, scale: str) -> Card:
    """The tool's tiles, their values over `scale` ("hour" or "day")."""
    w = figures.window(scale)
    where = WINDOWS[scale]
    tiles = [*_call_tiles(figures, scale, w, where), *_standing_tiles(figures, w, where)]
    return Card(figures=figures, tiles=tiles)


def _charts(
    figures: ToolFigures,
    name: str,
    of: Callable[[Tally], float | None],
    fmt: Callable[[float], str],
    **kw: float,
) -> Charts:
    """A tile's two charts (`hour` and `day`): `of` each bucket of each series."""

    def chart(s: str) -> Spark:
        return spark(
            [of(t) for t in figures.series(s)], title=f"{name}, {CHARTS[s]}", fmt=fmt, **kw
        )

    return Charts(hour=chart("hour"), day=chart("day"))


def _call_tiles(figures: ToolFigures, scale: str, w: Tally, where: str) -> list[Tile]:
    """How the calls went over the window: success, latency, retries and replays."""
    latency = "—"
    if w.latency:
        latency = " / ".join(duration(v) for v in w.latency)
    hour = figures.window("hour")
    before = figures.hit_rate_before
    return [
        Tile(
            "success",
            "Success rate",
            _or_dash(w.success_rate, percent),
            f"{w.succeeded} succeeded of {n(w.finished, 'finished call')}, {where}",
            "Calls that succeeded / calls that got an outcome.",
            **_charts(figures, "Success rate", lambda t: t.success_rate, percent, top=1.0),
        ),
        Tile(
            "latency",
            "Latency p50 / p95 / p99",
            latency,
            f"of {n(w.finished, 'finished call')}, {where}; charts: p95",
            "From when a call could run to its outcome: a held call's from its release "
            "(its wait for a reviewer is the Approval wait tile's).",
            **_charts(figures, "p95 latency", _p95, duration),
        ),
        Tile(
            "amplification",
            "Retry amplification",
            _or_dash(w.amplification, ratio),
            f"{n(w.requests, 'request')} / {n(w.sent, 'call')}, {where}",
            "Real requests / logical calls that sent at least one request.",
            **_charts(
                figures,
                "Retry amplification",
                lambda t: t.amplification,
                ratio,
                threshold=thresholds.AMPLIFICATION_MAX,
            ),
            flag=(
                f"Above {thresholds.AMPLIFICATION_MAX:g}: an unstable downstream or broken backoff."
                if figures.amplification_high(scale)
                else ""
            ),
        ),
        Tile(
            "hit-rate",
            "Idempotency hit rate",
            _or_dash(w.hit_rate, percent),
            f"{n(w.replays, 'replay')} / {n(w.hit_requests, 'request')}, {where}",
            "Replays / (replays + logical calls).",
            **_charts(figures, "Idempotency hit rate", lambda t: t.hit_rate, percent, top=1.0),
            flag=(
                f"Rising: {_or_dash(hour.hit_rate, percent)} in the last hour against "
                f"{_or_dash(before, percent)} in the 23 hours before. Something upstream "
                "is re-sending."
                if figures.hit_rate_rising
                else ""
            ),
        ),
    ]


def _standing_tiles(figures: ToolFigures, w: Tally, where: str) -> list[Tile]:
    """What stands open now, and what piled up over the window: the breaker, unknown
    outcomes, dead letters and approvals."""
    level = BREAKER_LABELS[figures.level]
    # "cooling down until 12:03 UTC; 4 failed requests, last hour"
    now = figures.breaker.label.partition(" — ")[2] if figures.breaker else ""
    return [
        Tile(
            "breaker",
            "Breaker",
            level,
            f"{now + '; ' if now else ''}{n(w.failed_requests, 'failed request')}, {where}",
            "The circuit breaker now; charts: requests that failed (what it trips on).",
            **_charts(figures, "Failed requests", lambda t: t.failed_requests, count),
            flag="Open: calls to this tool end at once as unavailable."
            if figures.breaker_open
            else "",
        ),
        Tile(
            "unknown",
            "Unknown outcomes",
            count(figures.unknown_now),
            f"unknown now; {n(w.unknown_requests, 'unknown request')}, {where}",
            "Agents' calls whose outcome is unknown now, waiting to be reconciled or settled.",
            **_charts(figures, "Unknown requests", lambda t: t.unknown_requests, count),
        ),
        Tile(
            "dead-letters",
            "Dead letters",
            count(figures.dead_letters_open),
            f"open now; {w.tickets_opened} opened, {where}",
            "Compensations by this (undo) tool that used up their attempts: open tickets.",
            **_charts(figures, "Tickets opened", lambda t: t.tickets_opened, count),
        ),
        Tile(
            "approval-wait",
            "Approval wait",
            _or_dash(w.approval_wait_s, duration),
            f"mean of {w.approvals} ended, {where}; {figures.approvals_pending} pending now",
            "From an approval's opening to its ending (approved, rejected or expired): "
            "kept out of the latency.",
            **_charts(figures, "Mean approval wait", lambda t: t.approval_wait_s, duration),
        ),
    ]
