"""The console's per-tool figures over the last hour (12 × 5 min) and the last day
(24 × 1 h), read from the same tables as `/metrics` and with the same definitions
(docs/metrics.md), so the page and a PromQL `increase(…[1h])` tell the same story.

Every query groups by tool, so the page costs the same few queries for 3 tools or 300.
Counts are read once, in 5-minute buckets over the whole day, and folded into both
scales; only the latency percentiles need a pass per window (GROUPING SETS on
PostgreSQL, Python on SQLite, the one-machine default).

A name the catalog lacks (a tool an agent made up, or one since removed) gets no figures
of its own: its rows count under one `(unknown)` entry, as on /metrics
(traces/labels.py)."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db import connection
from django.db.models import Count
from django.utils import timezone

from compensations.models import Ticket
from toolops import executor
from toolops.models import Approval, Attempt, ToolCall
from toolops.tools import registry
from toolops.tools.catalog import CatalogError
from traces.labels import UNKNOWN, tool_label
from traces.metrics import CLOSED
from traces.models import ReplayCount

from . import thresholds

FINE_S = 300  # the 5-minute bucket counts are read in
DAY_FINE = 24 * 3600 // FINE_S  # 288 of them in the day
HOUR_FINE = 3600 // FINE_S  # the last 12 are the hour
SCALES = {"hour": HOUR_FINE, "day": 24}  # buckets per chart
QUANTILES = (0.5, 0.95, 0.99)

Slot = tuple[str, int | None]  # ("hour" | "day", bucket index, or None: the whole window)


@dataclass
class Tally:
    """One tool's figures over one bucket or one whole window."""

    finished: int = 0  # logical calls: calls that got an outcome in it
    succeeded: int = 0
    sent: int = 0  # of those, the ones that sent at least one request
    requests: int = 0  # attempts (purpose "call") of those calls
    failed_requests: int = 0  # what the breaker counts against the tool
    unknown_requests: int = 0
    replays: int = 0
    approvals: int = 0  # approvals that ended in it
    wait_s: float = 0.0  # their summed wait
    tickets_opened: int = 0
    latency: tuple[float, ...] | None = None  # p50, p95, p99 seconds

    @property
    def success_rate(self) -> float | None:
        return self.succeeded / self.finished if self.finished else None

    @property
    def amplification(self) -> float | None:
        return self.requests / self.sent if self.sent else None

    @property
    def hit_requests(self) -> int:
        """Requests for the tool the idempotency layer saw: new calls and replays."""
        return self.replays + self.finished

    @property
    def hit_rate(self) -> float | None:
        return self.replays / self.hit_requests if self.hit_requests else None

    @property
    def approval_wait_s(self) -> float | None:
        return self.wait_s / self.approvals if self.approvals else None


@dataclass
class ToolFigures:
    tool: str
    internal: bool = False
    in_catalog: bool = False
    level: int = CLOSED  # toolops_breaker_state
    breaker: executor.BreakerState | None = None  # as the next call sees it; None: closed
    unknown_now: int = 0
    dead_letters_open: int = 0
    approvals_pending: int = 0
    tallies: dict[Slot, Tally] = field(default_factory=lambda: defaultdict(Tally))

    def window(self, scale: str) -> Tally:
        return self.tallies[(scale, None)]

    def series(self, scale: str) -> list[Tally]:
        return [self.tallies[(scale, i)] for i in range(SCALES[scale])]

    @property
    def hit_rate_before(self) -> float | None:
        """The hit rate over the 23 hours before the last hour."""
        day, hour = self.window("day"), self.window("hour")
        requests = day.hit_requests - hour.hit_requests
        return (day.replays - hour.replays) / requests if requests else None

    @property
    def hit_rate_rising(self) -> bool:
        hour = self.window("hour")
        return thresholds.hit_rate_rising(
            hour_requests=hour.hit_requests, hour_rate=hour.hit_rate, before=self.hit_rate_before
        )

    def amplification_high(self, scale: str) -> bool:
        return thresholds.amplification_high(self.window(scale).amplification)

    @property
    def breaker_open(self) -> bool:
        return thresholds.breaker_open(self.level)

    def active(self, scale: str) -> bool:
        """Anything happened over the window, or is open now: calls, requests, replays,
        approvals or tickets in it; unknown outcomes, open dead letters, pending approvals
        or a breaker not closed now. Each threshold needs one of these to be crossed, so a
        flagged tool is always active."""
        w = self.window(scale)
        return bool(
            w.finished
            or w.requests
            or w.replays
            or w.approvals
            or w.tickets_opened
            or self.unknown_now
            or self.dead_letters_open
            or self.approvals_pending
            or self.level != CLOSED
        )


def window_end(now: datetime | None = None) -> datetime:
    """The end of both windows: the next whole minute, so each ReplayCount minute falls
    inside one bucket, and everything up to now is in."""
    now = now or timezone.now()
    return now.replace(second=0, microsecond=0) + timedelta(minutes=1)


def tool_figures(*, end: datetime | None = None) -> list[ToolFigures]:
    """Every tool's figures: the catalog's tools (public first, then internal), then
    `(unknown)` when the data names any other tool. A constant number of queries, whatever
    the number of tools or of names the rows hold."""
    end = end or window_end()
    since = end - timedelta(days=1)
    tools: dict[str, ToolFigures] = {}
    try:
        specs = sorted(registry.load().values(), key=lambda s: (s.internal, s.name))
    except CatalogError:
        specs = []
    for spec in specs:
        tools[spec.name] = ToolFigures(spec.name, internal=spec.internal, in_catalog=True)
    names = frozenset(tools)

    def of(tool: str) -> ToolFigures:
        label = tool_label(tool, names)
        return tools.setdefault(label, ToolFigures(label))

    # The call groups come labelled: their percentiles cannot be added up afterwards.
    for (tool, scale, index), tally in _call_groups(since, end, sorted(names)).items():
        of(tool).tallies[(scale, index)] = tally
    params = {"since": since, "end": end}
    for tool, j, requests, failed, unknown in _fetch(_attempts_sql(), params):
        for slot in _slots(j):
            tally = of(tool).tallies[slot]
            tally.requests += requests
            tally.failed_requests += failed
            tally.unknown_requests += unknown
    for tool, j, replays in _fetch(_replays_sql(), params):
        for slot in _slots(j):
            of(tool).tallies[slot].replays += int(replays)
    for tool, j, pending, ended, wait_s in _fetch(_approvals_sql(), params):
        of(tool).approvals_pending += pending
        for slot in _slots(j):
            of(tool).tallies[slot].approvals += ended
            of(tool).tallies[slot].wait_s += float(wait_s or 0)
    for tool, j, still_open, opened in _fetch(_tickets_sql(), params):
        of(tool).dead_letters_open += still_open
        for slot in _slots(j):
            of(tool).tallies[slot].tickets_opened += opened
    unknown = (
        ToolCall.objects.agent_calls()
        .filter(status=ToolCall.Status.UNKNOWN)
        .order_by()
        .values_list("tool")
        .annotate(n=Count("pk"))
    )
    for tool, n in unknown:
        of(tool).unknown_now += n
    # The one reading every page shows (tool health too): as the next call would see it.
    for tool, state in executor.breaker_states().items():
        # A breaker row left by a removed tool guards nothing: not (unknown)'s state.
        if tool in names:
            tools[tool].level = state.level
            tools[tool].breaker = state
    return list(tools.values())


def _slots(j: int | None) -> Iterator[Slot]:
    """The buckets and windows a 5-minute bucket of the day counts in. None: before the
    day (an approval still pending, a ticket opened earlier and still open)."""
    if j is None or not 0 <= j < DAY_FINE:
        return
    yield ("day", j // HOUR_FINE)
    yield ("day", None)
    if j >= DAY_FINE - HOUR_FINE:
        yield ("hour", j - (DAY_FINE - HOUR_FINE))
        yield ("hour", None)


def _fine(column: str) -> str:
    """SQL for the 5-minute bucket of the day `column` falls in (0 … 287)."""
    if connection.vendor == "postgresql":
        return f"FLOOR(EXTRACT(EPOCH FROM ({column} - %(since)s)) / {FINE_S})::int"
    return f"CAST((julianday({column}) - julianday(%(since)s)) * 86400.0 / {FINE_S} AS INTEGER)"


def _seconds_between(later: str, earlier: str) -> str:
    if connection.vendor == "postgresql":
        return f"EXTRACT(EPOCH FROM ({later} - {earlier}))::float8"
    return f"(julianday({later}) - julianday({earlier})) * 86400.0"


def _fetch(sql: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
    adapt = connection.ops.adapt_datetimefield_value
    with connection.cursor() as cursor:
        cursor.execute(
            sql, {k: adapt(v) if isinstance(v, datetime) else v for k, v in params.items()}
        )
        return cursor.fetchall()


def _in_day(column: str) -> str:
    return f"{column} >= %(since)s AND {column} < %(end)s"


def _attempts_sql() -> str:
    # Requests of the calls that finished in the bucket (not the requests started in it),
    # so a bucket's amplification is its own calls' requests over those calls.
    return (
        f"SELECT a.tool, {_fine('c.finished_at')} AS j, COUNT(*), "
        "SUM(CASE WHEN a.health = 'failure' THEN 1 ELSE 0 END), "
        "SUM(CASE WHEN a.outcome = 'unknown' THEN 1 ELSE 0 END) "
        f"FROM {Attempt._meta.db_table} a JOIN {ToolCall._meta.db_table} c ON c.id = a.call_id "
        f"WHERE a.purpose = 'call' AND {_in_day('c.finished_at')} GROUP BY a.tool, j"
    )


def _replays_sql() -> str:
    return (
        f"SELECT tool, {_fine('minute')} AS j, SUM(count) FROM {ReplayCount._meta.db_table} "
        f"WHERE {_in_day('minute')} GROUP BY tool, j"
    )


def _approvals_sql() -> str:
    # Approvals still pending (bucket NULL), and those that ended in the day.
    return (
        f"SELECT tool, CASE WHEN status = 'pending' THEN NULL ELSE {_fine('decided_at')} END "
        "AS j, SUM(CASE WHEN status = 'pending' THEN 1 ELSE 0 END), "
        "SUM(CASE WHEN status = 'pending' THEN 0 ELSE 1 END), "
        "SUM(CASE WHEN status = 'pending' THEN 0 ELSE "
        f"{_seconds_between('decided_at', 'created_at')} END) "
        f"FROM {Approval._meta.db_table} "
        f"WHERE status = 'pending' OR ({_in_day('decided_at')}) GROUP BY tool, j"
    )


def _tickets_sql() -> str:
    # Open tickets, whenever opened (bucket NULL before the day), and tickets opened in
    # the day; by the undo tool that failed.
    return (
        f"SELECT tool, CASE WHEN opened_at >= %(since)s THEN {_fine('opened_at')} END AS j, "
        "SUM(CASE WHEN status = 'open' THEN 1 ELSE 0 END), COUNT(*) "
        f"FROM {Ticket._meta.db_table} "
        f"WHERE status = 'open' OR ({_in_day('opened_at')}) GROUP BY tool, j"
    )


def _calls_sql() -> str:
    """PostgreSQL: every call figure for every bucket and both windows in one pass.
    GROUPING(hb, mb, recent) says which set a row belongs to: 3 (tool, hour of the day),
    5 (tool, 5 minutes of the last hour), 7 (tool: the day), 6 (tool, recent: the hour).
    `tool` is already the label: a catalog name (%(tools)s) or %(unknown)s."""
    last = DAY_FINE - HOUR_FINE
    quantiles = ", ".join(str(q) for q in QUANTILES)
    return (
        "SELECT tool, hb, mb, recent, GROUPING(hb, mb, recent), COUNT(*), "
        "SUM(CASE WHEN status = 'succeeded' THEN 1 ELSE 0 END), "
        "SUM(CASE WHEN attempts > 0 THEN 1 ELSE 0 END), "
        f"percentile_cont(ARRAY[{quantiles}]) WITHIN GROUP (ORDER BY seconds) "
        "FROM (SELECT tool, status, attempts, seconds, "
        f"j / {HOUR_FINE} AS hb, CASE WHEN j >= {last} THEN j - {last} END AS mb, "
        f"j >= {last} AS recent FROM (SELECT "
        "CASE WHEN c.tool = ANY(%(tools)s) THEN c.tool ELSE %(unknown)s END AS tool, "
        "c.status, c.attempts, "
        f"{_seconds_between('c.finished_at', LATENCY_START)} AS seconds, "
        f"{_fine('c.finished_at')} AS j FROM {ToolCall._meta.db_table} c "
        f"LEFT JOIN {Approval._meta.db_table} a ON a.id = c.approval_id "
        f"WHERE {_in_day('c.finished_at')}) f) c "
        "GROUP BY GROUPING SETS ((tool, hb), (tool, mb), (tool), (tool, recent))"
    )


GROUPING_SLOTS = {3: "day", 5: "hour", 7: "day", 6: "hour"}
# A call's latency starts when it could run: a held call's when the reviewer released it
# (the worker took it up, or the decision if it never ran), not while it waited. The
# wait is the approval wait figure's (`_approvals_sql`), never the tool's latency.
LATENCY_START = "COALESCE(a.execution_started_at, a.decided_at, c.created_at)"


def _call_groups(
    since: datetime, end: datetime, tools: list[str]
) -> dict[tuple[str, str, int | None], Tally]:
    """Each (label, scale, bucket)'s call figures; the label as in `tool_label`."""
    if connection.vendor != "postgresql":
        return call_groups_python(since, end, tools)
    out: dict[tuple[str, str, int | None], Tally] = {}
    params = {"since": since, "end": end, "tools": tools, "unknown": UNKNOWN}
    for row in _fetch(_calls_sql(), params):
        tool, hb, mb, recent, grouping, finished, succeeded, sent, latency = row
        index = {3: hb, 5: mb, 7: None, 6: None}[grouping]
        if (grouping == 5 and mb is None) or (grouping == 6 and not recent):
            continue  # calls before the last hour, in the hour's sets
        out[(tool, GROUPING_SLOTS[grouping], index)] = Tally(
            finished=finished, succeeded=succeeded, sent=sent, latency=tuple(latency)
        )
    return out


def call_groups_python(
    since: datetime, end: datetime, tools: list[str]
) -> dict[tuple[str, str, int | None], Tally]:
    """The same figures as _calls_sql, computed in Python from the day's call rows (for
    SQLite, which has no percentile_cont and no GROUPING SETS)."""
    out: dict[tuple[str, str, int | None], Tally] = defaultdict(Tally)
    durations: dict[tuple[str, str, int | None], list[float]] = defaultdict(list)
    names = frozenset(tools)
    rows = ToolCall.objects.filter(finished_at__gte=since, finished_at__lt=end).values_list(
        "tool",
        "status",
        "attempts",
        "created_at",
        "finished_at",
        "approval__execution_started_at",
        "approval__decided_at",
    )
    for name, status, attempts, created_at, finished_at, *released in rows.iterator():
        assert finished_at is not None  # the filter's range leaves out NULL
        start = next((t for t in released if t is not None), created_at)  # LATENCY_START
        tool = tool_label(name, names)
        j = math.floor((finished_at - since).total_seconds() / FINE_S)
        for scale, index in _slots(j):
            tally = out[(tool, scale, index)]
            tally.finished += 1
            tally.succeeded += status == ToolCall.Status.SUCCEEDED
            tally.sent += attempts > 0
            durations[(tool, scale, index)].append((finished_at - start).total_seconds())
    for key, values in durations.items():
        values.sort()
        out[key].latency = tuple(percentile_cont(values, q) for q in QUANTILES)
    return dict(out)


def percentile_cont(ordered: list[float], q: float) -> float:
    """PostgreSQL's percentile_cont: linear interpolation between the two nearest ranks."""
    position = q * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)
