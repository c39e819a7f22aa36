"""`/metrics` for Prometheus, and the console's Metrics page: both read the tables at
request time, so every web process answers the same (docs/metrics.md)."""

from __future__ import annotations

import hmac
from typing import Any

from django import forms
from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST

from toolops.permissions import console_required
from toolops.views.common import HtmxHttpRequest, page_context
from traces.console import thresholds, tiles, triage
from traces.console.figures import tool_figures
from traces.metrics import metrics_text_cached


def _bearer_ok(request: HttpRequest, expected: str) -> bool:
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    # Constant time: how much of a guessed token matched must not show in the timing.
    return scheme.lower() == "bearer" and hmac.compare_digest(
        token.strip().encode(), expected.encode()
    )


@require_GET
def prometheus_metrics(request: HttpRequest) -> HttpResponse:
    """Prometheus text. Open unless TOOLOPS_METRICS_TOKEN is set; then the scraper sends
    `Authorization: Bearer <token>`. No console login: a scraper has no session. Each
    process answers from its last scrape for TOOLOPS_METRICS_CACHE_S seconds."""
    expected = settings.TOOLOPS_METRICS_TOKEN
    if expected and not _bearer_ok(request, expected):
        response = HttpResponse(
            "A metrics token is required: Authorization: Bearer <TOOLOPS_METRICS_TOKEN>.\n",
            status=401,
            content_type="text/plain; charset=utf-8",
        )
        response["WWW-Authenticate"] = 'Bearer realm="toolops-metrics"'
        return response
    # Behind the token check: a cached answer is as secret as a fresh one.
    text = metrics_text_cached(max_age_s=settings.TOOLOPS_METRICS_CACHE_S)
    return HttpResponse(text, content_type=CONTENT_TYPE_LATEST)


class MetricsQuery(forms.Form):
    window = forms.ChoiceField(
        choices=list(tiles.WINDOWS.items()),
        required=False,
        error_messages={"invalid_choice": "must be “hour” or “day”, not “%(value)s”"},
    )
    tool = forms.CharField(max_length=128, required=False)
    # The tools without calls in the window are listed only when asked for.
    all = forms.BooleanField(required=False)


@require_GET
@console_required
def metrics_page(request: HtmxHttpRequest) -> HttpResponse:
    """Every active tool's figures (or one tool's, `?tool=`) over the last hour or day
    (`?window=hour|day`), with charts over both: flagged tools first, then active ones;
    the idle ones by name with `?all=1`, else a link to them (traces/console/triage.py)."""
    query = MetricsQuery(request.GET)
    if not query.is_valid():
        problems = [f"{name}: {error}" for name, errs in query.errors.items() for error in errs]
        return _page(request, status=400, problems=problems)
    scale = query.cleaned_data["window"] or "hour"
    only = query.cleaned_data["tool"]
    figures = tool_figures()
    if only:
        figures = [f for f in figures if f.tool == only]
        if not figures:
            return _page(request, status=404, problems=[f"tool: no tool named “{only}”"])
    sections = triage.sections(figures, scale)
    return _page(
        request,
        scale=scale,
        only=only,
        sections=sections,
        show_all=query.cleaned_data["all"],
        flagged=len(sections.flagged),
        dead_letters=sum(f.dead_letters_open for f in figures),
        approvals_pending=sum(f.approvals_pending for f in figures),
    )


def _page(request: HtmxHttpRequest, *, status: int = 200, **ctx: Any) -> HttpResponse:
    ctx.setdefault("scale", "hour")
    ctx = page_context(
        request,
        "metrics",
        windows=tiles.WINDOWS,
        window_label=tiles.WINDOWS[ctx["scale"]],
        amplification_max=thresholds.AMPLIFICATION_MAX,
        rise_points=thresholds.HIT_RATE_RISE_POINTS * 100,
        rise_factor=thresholds.HIT_RATE_RISE_FACTOR,
        rise_min=thresholds.HIT_RATE_MIN_REQUESTS,
        **ctx,
    )
    return render(request, "traces/metrics.html", ctx, status=status)
