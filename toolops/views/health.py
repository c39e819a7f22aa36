"""Tool health (each tool's failure rate and median latency over its breaker's window)
and the operator's breaker controls: force open, reset (each confirmed by a ticked "I
understand", so a stray click changes nothing). The breaker's state is the one every
page shows: as the next call would see it (executor.breaker_states)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.contrib import messages
from django.db import connection
from django.db.models import Aggregate, Count, FloatField, Q
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from toolops import executor, services
from toolops.forms import BreakerForceOpenForm
from toolops.models import Attempt, CircuitBreaker
from toolops.permissions import can_control_breakers, console_required, require_breaker_operator
from toolops.tools import registry
from toolops.tools.catalog import CatalogError
from toolops.tools.spec import ToolSpec
from toolops.views.common import HtmxHttpRequest, get_catalog_tool, page_context


class Median(Aggregate):
    """PostgreSQL's ordered-set aggregate for the 50th percentile."""

    function = "PERCENTILE_CONT"
    name = "Median"
    template = "%(function)s(0.5) WITHIN GROUP (ORDER BY %(expressions)s)"
    output_field = FloatField()


@dataclass
class HealthRow:
    spec: ToolSpec
    breaker: CircuitBreaker | None
    shown: executor.BreakerState  # the state as the next call would see it
    # Attempts in the breaker's window that say something about the tool (not neutral).
    counted: int
    failed: int
    p50_ms: float | None
    form: BreakerForceOpenForm

    @property
    def state(self) -> str:
        return self.shown.state

    @property
    def rate(self) -> float | None:
        return self.failed / self.counted if self.counted else None

    @property
    def rate_over_threshold(self) -> bool:
        """What the breaker would trip on (a rate at or over the threshold, enough calls)."""
        config = self.spec.breaker
        rate = self.rate
        return rate is not None and self.counted >= config.min_calls and rate >= config.failure_rate


def _window_counts(specs: list[ToolSpec], now: datetime) -> dict[str, Mapping[str, Any]]:
    """Each tool's attempts over its own breaker window, in ONE grouped query: the same
    counts the breaker trips on (breaker._window_rate), for every tool at once."""
    windows: dict[float, list[str]] = {}
    for spec in specs:
        windows.setdefault(spec.breaker.window_s, []).append(spec.name)
    if not windows:
        return {}
    # One (tool IN …, started_at ≥ …) term per distinct window; (tool, started_at) is indexed.
    where = Q()
    for window_s, names in windows.items():
        where |= Q(tool__in=names, started_at__gte=now - timedelta(seconds=window_s))
    aggregates: dict[str, Any] = {
        "counted": Count("pk", filter=~Q(health=Attempt.Health.NEUTRAL)),
        "failed": Count("pk", filter=Q(health=Attempt.Health.FAILURE)),
    }
    if connection.vendor == "postgresql":  # SQLite has no percentile; the page shows "—"
        aggregates["p50_ms"] = Median("duration_ms")
    # The Django plugin would type a row by values("tool") alone, not the aggregates
    # spread in with **: a row is read as the mapping it is.
    rows: Iterable[Mapping[str, Any]] = (
        Attempt.objects.filter(where).order_by().values("tool").annotate(**aggregates)
    )
    return {row["tool"]: row for row in rows}


def _health_rows(bound: BreakerForceOpenForm | None = None) -> list[HealthRow]:
    """Every tool in the catalog (internal ones too), public first. `bound`: a force-open
    form that failed validation, shown again on its own tool's row."""
    specs = sorted(registry.load().values(), key=lambda s: (s.internal, s.name))
    now = timezone.now()
    breakers = {b.tool: b for b in CircuitBreaker.objects.all()}
    states = executor.breaker_states()
    counts = _window_counts(specs, now)
    rows = []
    for spec in specs:
        row = counts.get(spec.name, {})
        form = bound if bound is not None and bound.prefix == spec.name else None
        rows.append(
            HealthRow(
                spec=spec,
                breaker=breakers.get(spec.name),
                shown=executor.breaker_state_of(states, spec.name),
                counted=row.get("counted", 0),
                failed=row.get("failed", 0),
                p50_ms=row.get("p50_ms"),
                form=form or BreakerForceOpenForm(prefix=spec.name),
            )
        )
    return rows


def _health_page(
    request: HtmxHttpRequest, bound: BreakerForceOpenForm | None = None
) -> HttpResponse:
    try:
        rows, catalog_error = _health_rows(bound), ""
    except CatalogError as exc:
        rows, catalog_error = [], str(exc)
    ctx = page_context(
        request,
        "health",
        rows=rows,
        catalog_error=catalog_error,
        can_control=can_control_breakers(request.user),
        bound=bound,
    )
    return render(request, "console/health.html", ctx)


@require_GET
@console_required
def tool_health(request: HtmxHttpRequest) -> HttpResponse:
    return _health_page(request)


@require_POST
@console_required
def breaker_force_open(request: HtmxHttpRequest, name: str) -> HttpResponse:
    require_breaker_operator(request.user)
    spec = get_catalog_tool(name)
    form = BreakerForceOpenForm(request.POST, prefix=spec.name)
    if not form.is_valid():
        return _health_page(request, bound=form)
    minutes = form.cleaned_data["minutes"]
    row = services.breaker_force_open_audited(
        tool=spec.name,
        minutes=minutes,
        reason=form.cleaned_data["reason"],
        by=request.user,
    )
    until = f"{timezone.localtime(row.open_until):%Y-%m-%d %H:%M}" if row.open_until else "?"
    messages.success(
        request,
        f"Breaker for {spec.name} held open for {minutes} min (until {until} UTC): every call "
        "to it ends at once as temporarily unavailable.",
    )
    return redirect("console:health")


@require_POST
@console_required
def breaker_reset(request: HtmxHttpRequest, name: str) -> HttpResponse:
    require_breaker_operator(request.user)
    spec = get_catalog_tool(name)
    if services.breaker_reset_audited(tool=spec.name, by=request.user) is None:
        messages.info(request, f"The breaker for {spec.name} never tripped: nothing to reset.")
    else:
        messages.success(request, f"Breaker for {spec.name} reset: closed, failure count cleared.")
    return redirect("console:health")
