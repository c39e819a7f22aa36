"""The console: runs, run detail."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET

from toolops.models import Run


@require_GET
@login_required
def run_list(request: HttpRequest) -> HttpResponse:
    runs = Run.objects.select_related("agent").order_by("-created_at")[:100]
    return render(request, "console/runs.html", {"runs": runs})


@require_GET
@login_required
def run_detail(request: HttpRequest, pk: int) -> HttpResponse:
    run = get_object_or_404(Run, pk=pk)
    return render(request, "console/run_detail.html", {"run": run, "calls": run.calls.all()})
