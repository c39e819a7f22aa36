"""Small inline SVG charts, drawn on the server: a figure's buckets as a line, with gaps
where a bucket had nothing to measure. No JavaScript, so the page reads the same
without it, and each chart carries a text alternative. A series with fewer than two
measured buckets draws nothing (one dot says less than its number): the page shows
its `text` instead."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

WIDTH = 120
HEIGHT = 28
PAD = 2  # keeps the stroke inside the box at the top and bottom


@dataclass
class Spark:
    label: str  # the text alternative: what the chart shows, in words
    lines: list[str] = field(default_factory=list)  # polyline points, one per unbroken run
    dots: list[tuple[float, float]] = field(default_factory=list)  # a run of one bucket
    threshold_y: float | None = None  # where the threshold's dashed line runs
    width: int = WIDTH
    height: int = HEIGHT
    points: int = 0  # buckets with a value
    text: str = "no data"  # shown instead of a chart of fewer than 2 points

    @property
    def drawn(self) -> bool:
        return self.points >= 2


def spark(
    values: list[float | None],
    *,
    title: str,
    fmt: Callable[[float], str],
    top: float | None = None,
    threshold: float | None = None,
) -> Spark:
    """`values`: one per bucket, oldest first; None where there was nothing to measure.
    The y axis runs from 0 to `top` (a rate's 1.0), or to the largest value (and the
    threshold, so its line stays in view)."""
    seen = [v for v in values if v is not None]
    if not seen:
        return Spark(label=f"{title}: no data")
    if len(seen) < 2:
        return Spark(label=f"{title}: {fmt(seen[0])}", points=1, text=fmt(seen[0]))
    peak = max([*seen, threshold or 0.0, top or 0.0]) or 1.0
    step = WIDTH / max(len(values) - 1, 1)

    def y(value: float) -> float:
        return round(HEIGHT - PAD - (HEIGHT - 2 * PAD) * min(value, peak) / peak, 2)

    chart = Spark(
        label=f"{title}: latest {fmt(seen[-1])}, highest {fmt(max(seen))}", points=len(seen)
    )
    run: list[tuple[float, float]] = []
    for i, value in enumerate([*values, None]):
        if value is not None:
            run.append((round(i * step, 2), y(value)))
            continue
        if len(run) == 1:
            chart.dots.append(run[0])
        elif run:
            chart.lines.append(" ".join(f"{px},{py}" for px, py in run))
        run = []
    if threshold is not None:
        chart.threshold_y = y(threshold)
    return chart
