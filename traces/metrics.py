"""Prometheus text for `/metrics`, computed at scrape time from the tables.

The database is the one truth every process shares: whichever web process answers a
scrape reports the same totals, and they include what the workers did (approved calls,
undo calls, reconciled outcomes). Nothing is counted in process memory, so a restart
loses nothing. The cost is a handful of grouped aggregates per scrape (see
docs/metrics.md); the counters drop when retention purges rows, which Prometheus reads as
a counter reset.

A replay writes no call row, so replays are the one thing counted as they happen: one
upsert per replay into ReplayCount (`replay_noted`).

Every `tool` label is a catalog tool's name or `(unknown)` (traces/labels.py): a name an
agent made up never becomes a series of its own."""

from __future__ import annotations

import random
import threading
import time
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from datetime import timedelta
from typing import Any

from django.db import connection
from django.db.models import (
    Count,
    DurationField,
    ExpressionWrapper,
    F,
    Min,
    Q,
    Sum,
    Value,
)
from django.db.models.functions import Coalesce, Now
from django.db.models.lookups import LessThanOrEqual
from django.utils import timezone
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from compensations.models import Ticket
from toolops.breaker_state import breaker_states
from toolops.models import Approval, Attempt, NotificationDelivery, ToolCall

from .labels import UNKNOWN, catalog_tools, in_catalog, tool_label_sql
from .models import ReplayCount
from .policy_metrics import policy_families

# Seconds. A call's duration runs from when it could run to its outcome: a held call's
# from its release by a reviewer (the approval wait is toolops_approval_wait_seconds).
DURATION_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)
APPROVAL_WAIT_BUCKETS = (10.0, 30.0, 60.0, 300.0, 900.0, 1800.0, 3600.0, 14400.0, 86400.0)
# toolops_approvals_expiring: the notifications' "about to expire" horizon
# (toolops/notify/watch.py EXPIRING_MAX), so an alert and a reviewer's notice agree.
APPROVAL_EXPIRING = timedelta(minutes=5)

# toolops_breaker_state
CLOSED, HALF_OPEN, OPEN = 0, 1, 2
BREAKER_LABELS = {CLOSED: "closed", HALF_OPEN: "half-open", OPEN: "open"}

_REPLAY_SQL = (
    f"INSERT INTO {ReplayCount._meta.db_table} (tool, minute, shard, count) "
    "VALUES (%s, %s, %s, 1) ON CONFLICT (tool, minute, shard) "
    f"DO UPDATE SET count = {ReplayCount._meta.db_table}.count + 1"
)
REPLAY_SHARDS = 8


def replay_noted(*, tool: str) -> None:
    """Count one idempotency replay of `tool` in the current minute. ONE statement, with
    no read first: the replay path is benchmarked, and racing replays of one tool meet in
    the unique (tool, minute, shard) row, which the upsert increments atomically; the
    shard, random, keeps concurrent replays of one tool from queueing on one row lock
    (each held until its commit). A replay of a call to a tool the catalog lacks counts
    under `(unknown)` (the catalog is in memory)."""
    if not in_catalog(tool):
        tool = UNKNOWN
    minute = timezone.now().replace(second=0, microsecond=0)
    with connection.cursor() as cursor:
        cursor.execute(
            _REPLAY_SQL,
            [
                tool,
                connection.ops.adapt_datetimefield_value(minute),
                random.randrange(REPLAY_SHARDS),
            ],
        )


def breaker_levels() -> dict[str, int]:
    """Each breaker row's level (0 closed, 1 half-open, 2 open), as the next call would
    see it (toolops/breaker_state.py: the reading every page shows). Tools without a row
    never tripped: closed."""
    return {tool: state.level for tool, state in breaker_states().items()}


# When a call could run: a held call's release (the worker took it up, or the decision
# when it never ran), else its creation. The same start as the Metrics page's latency.
LATENCY_START = Coalesce(
    F("approval__execution_started_at"), F("approval__decided_at"), F("created_at")
)


def _between(later: str, earlier: str) -> ExpressionWrapper:
    return ExpressionWrapper(F(later) - F(earlier), output_field=DurationField())


def _seconds(value: timedelta | None) -> float:
    return value.total_seconds() if value is not None else 0.0


def _age(oldest: str, *, among: Q | None = None) -> ExpressionWrapper:
    """How long ago the oldest `oldest` of the rows (`among` them) was, by the database's
    clock, the one every process shares (toolops/dbclock.py). No rows: NULL, shown as 0."""
    return ExpressionWrapper(Now() - Min(oldest, filter=among), output_field=DurationField())


def _age_seconds(value: timedelta | None) -> float:
    # A row stamped by a process clock a little ahead of the database's is not from the
    # future: it is new.
    return max(_seconds(value), 0.0)


def _histogram_aggregates(
    seconds: ExpressionWrapper, bounds: tuple[float, ...]
) -> dict[str, Count]:
    """One COUNT per bucket bound: the histogram's cumulative buckets, summed in SQL."""
    return {
        f"le_{i}": Count(
            "pk",
            filter=LessThanOrEqual(
                seconds, Value(timedelta(seconds=bound), output_field=DurationField())
            ),
        )
        for i, bound in enumerate(bounds)
    }


def _buckets(
    row: dict[str, float], bounds: tuple[float, ...], total: float
) -> list[tuple[str, float]]:
    return [(repr(b), row[f"le_{i}"]) for i, b in enumerate(bounds)] + [("+Inf", total)]


class ToolOpsCollector:
    """Every ToolOps metric, read from the tables on each scrape (10 queries, 2 of them
    the agent policy's; one more per limit of the policy in force)."""

    def collect(self) -> Iterator[Metric]:
        tools = catalog_tools()
        yield from self._calls(tools)
        yield self._attempts(tools)
        yield self._replays(tools)
        yield self._breakers(tools)
        yield from self._unknown(tools)
        yield from self._dead_letters()
        yield from self._approvals()
        yield self._notifications_failed()
        yield from policy_families()

    def _calls(self, tools: list[str]) -> Iterator[Metric]:
        duration = ExpressionWrapper(F("finished_at") - LATENCY_START, output_field=DurationField())
        # The Django plugin would type a row by the annotate() keywords it can see, not the
        # histogram's buckets spread in with **: a row is read as the mapping it is.
        rows: Iterable[Mapping[str, Any]] = (
            ToolCall.objects.filter(finished_at__isnull=False)
            .order_by()
            .annotate(label=tool_label_sql(tools))
            .values("label", "status")
            .annotate(
                n=Count("pk"),
                sent=Count("pk", filter=Q(attempts__gt=0)),
                seconds=Sum(duration),
                **_histogram_aggregates(duration, DURATION_BUCKETS),
            )
        )
        calls = CounterMetricFamily(
            "toolops_tool_calls",
            "Logical calls with an outcome (agents' calls and undo calls), by current status.",
            labels=["tool", "status"],
        )
        sent = CounterMetricFamily(
            "toolops_tool_calls_sent",
            "Logical calls with an outcome that sent at least one request: the denominator "
            "of retry amplification.",
            labels=["tool"],
        )
        per_tool: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        for row in rows:
            calls.add_metric([row["label"], row["status"]], row["n"])
            tool = per_tool[row["label"]]
            for name in ("n", "sent", *(f"le_{i}" for i in range(len(DURATION_BUCKETS)))):
                tool[name] += row[name]
            tool["seconds"] += _seconds(row["seconds"])
        durations = HistogramMetricFamily(
            "toolops_tool_call_duration_seconds",
            "Seconds from a call's start to its outcome (a held call's from its release "
            "by a reviewer: the wait is toolops_approval_wait_seconds).",
            labels=["tool"],
        )
        for name, tool in sorted(per_tool.items()):
            sent.add_metric([name], tool["sent"])
            buckets = _buckets(tool, DURATION_BUCKETS, tool["n"])
            durations.add_metric([name], buckets, sum_value=tool["seconds"])
        yield calls
        yield sent
        yield durations

    def _attempts(self, tools: list[str]) -> Metric:
        # Requests to the tool itself. A reconcile look (purpose "reconcile") is a request
        # to the query tool on the call's behalf, outcome ok or query_failed: not counted.
        rows = (
            Attempt.objects.filter(purpose="call")
            .order_by()
            .annotate(label=tool_label_sql(tools))
            .values_list("label", "outcome")
            .annotate(n=Count("pk"))
        )
        family = CounterMetricFamily(
            "toolops_tool_attempts",
            "Real requests to a tool (one per attempt), by outcome: ok, fatal, retry, unknown.",
            labels=["tool", "outcome"],
        )
        for tool, outcome, n in rows:
            family.add_metric([tool, outcome], n)
        return family

    def _replays(self, tools: list[str]) -> Metric:
        # Rows of a tool since removed from the catalog (new ones are labelled as written).
        rows = (
            ReplayCount.objects.order_by()
            .annotate(label=tool_label_sql(tools))
            .values_list("label")
            .annotate(n=Sum("count"))
        )
        family = CounterMetricFamily(
            "toolops_idempotency_replays",
            "Requests answered with an existing call instead of a new one (idempotency "
            "record, earlier tool_call_id, or a wait for the first request).",
            labels=["tool"],
        )
        for tool, n in rows:
            family.add_metric([tool], n)
        return family

    def _breakers(self, tools: list[str]) -> Metric:
        # The catalog's tools only: a breaker row left by a removed tool guards nothing.
        found = breaker_levels()
        levels = {tool: found.get(tool, CLOSED) for tool in tools}
        family = GaugeMetricFamily(
            "toolops_breaker_state",
            "Circuit breaker: 0 closed, 1 half-open (the next call probes), 2 open.",
            labels=["tool"],
        )
        for tool, level in sorted(levels.items()):
            family.add_metric([tool], level)
        return family

    def _unknown(self, tools: list[str]) -> Iterator[Metric]:
        # The oldest one's age in the same grouped read: the rows are read for the count.
        rows = (
            ToolCall.objects.agent_calls()
            .filter(status=ToolCall.Status.UNKNOWN)
            .order_by()
            .annotate(label=tool_label_sql(tools))
            .values_list("label")
            .annotate(n=Count("pk"), age=_age("created_at"))
        )
        found = {label: (n, _age_seconds(age)) for label, n, age in rows}
        counts = dict.fromkeys(tools, (0, 0.0)) | found
        family = GaugeMetricFamily(
            "toolops_unknown_calls",
            "Agents' calls whose outcome is unknown now (waiting to be reconciled or settled).",
            labels=["tool"],
        )
        oldest = GaugeMetricFamily(
            "toolops_unknown_calls_oldest_age_seconds",
            "Seconds since the oldest of a tool's calls with an unknown outcome was made "
            "(0: none).",
            labels=["tool"],
        )
        for tool, (n, age) in sorted(counts.items()):
            family.add_metric([tool], n)
            oldest.add_metric([tool], age)
        yield family
        yield oldest

    def _dead_letters(self) -> Iterator[Metric]:
        # One read on the (status, opened_at) index: the count and the oldest together.
        row = Ticket.objects.open().aggregate(n=Count("pk"), age=_age("opened_at"))
        yield GaugeMetricFamily(
            "toolops_dead_letters_open",
            "Dead-lettered compensations whose support ticket is open.",
            value=row["n"],
        )
        yield GaugeMetricFamily(
            "toolops_dead_letters_oldest_age_seconds",
            "Seconds since the oldest open support ticket was opened (0: none open).",
            value=_age_seconds(row["age"]),
        )

    def _approvals(self) -> Iterator[Metric]:
        wait = _between("decided_at", "created_at")
        pending = Q(status=Approval.Status.PENDING)
        # Past its time too, until the worker ends it (within a minute), as the home counts.
        expiring = Q(expires_at__lte=Now() + APPROVAL_EXPIRING)
        # The pending figures ride on the histogram's read of the table: no query more.
        row = Approval.objects.aggregate(
            pending=Count("pk", filter=pending),
            expiring=Count("pk", filter=pending & expiring),
            oldest=_age("created_at", among=pending),
            decided=Count("pk", filter=Q(decided_at__isnull=False)),
            seconds=Sum(wait),
            **_histogram_aggregates(wait, APPROVAL_WAIT_BUCKETS),
        )
        yield GaugeMetricFamily(
            "toolops_approvals_pending",
            "Calls waiting for a reviewer's decision.",
            value=row["pending"],
        )
        yield GaugeMetricFamily(
            "toolops_approvals_oldest_age_seconds",
            "Seconds the oldest pending approval has waited (0: none pending).",
            value=_age_seconds(row["oldest"]),
        )
        yield GaugeMetricFamily(
            "toolops_approvals_expiring",
            "Pending approvals that expire within 5 minutes unless someone decides (or "
            "have expired, until the worker ends them).",
            value=row["expiring"],
        )
        waits = HistogramMetricFamily(
            "toolops_approval_wait_seconds",
            "Seconds from an approval's opening to its ending (approved, rejected, expired).",
        )
        buckets = _buckets(row, APPROVAL_WAIT_BUCKETS, row["decided"])
        waits.add_metric([], buckets, sum_value=_seconds(row["seconds"]))
        yield waits

    def _notifications_failed(self) -> Metric:
        # Failed rows only (the outbox's Send again empties them): the (status, …) index
        # reads them without the sent ones, which nothing purges.
        failed = NotificationDelivery.Status.FAILED
        rows = (
            NotificationDelivery.objects.filter(status=failed)
            .order_by()
            .values_list("channel")
            .annotate(n=Count("pk"))
        )
        counts = dict.fromkeys(NotificationDelivery.Channel.values, 0) | dict(rows)
        family = GaugeMetricFamily(
            "toolops_notifications_failed",
            "Notification deliveries given up (tries used up, or a message that cannot be "
            "written), waiting for an operator's Send again.",
            labels=["channel"],
        )
        for channel, n in sorted(counts.items()):
            family.add_metric([channel], n)
        return family


REGISTRY = CollectorRegistry()
REGISTRY.register(ToolOpsCollector())


def metrics_text() -> bytes:
    """The Prometheus text exposition of every ToolOps metric, read now."""
    return generate_latest(REGISTRY)


# The last answer of this process: (when, by the monotonic clock; the text).
_last: tuple[float, bytes] | None = None
_computing = threading.Lock()


def metrics_text_cached(*, max_age_s: float) -> bytes:
    """metrics_text(), or this process's last answer when it is younger than `max_age_s`.

    A scrape runs whole-table aggregates; a flood of scrapes (many scrapers, or one
    hostile client when /metrics is open) would run them back to back. Per process, not
    in the shared cache: one process then costs at most one aggregate per window, and
    the answer never waits on Redis. Concurrent scrapes wait for the one computing
    instead of each running the aggregates (the lock is held while it computes)."""
    global _last
    with _computing:
        if _last is not None and time.monotonic() - _last[0] < max_age_s:
            return _last[1]
        text = metrics_text()
        _last = (time.monotonic(), text)
        return text
