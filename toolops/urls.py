from __future__ import annotations

import sys

from django.contrib import admin
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.loader import render_to_string
from django.urls import include, path
from django.views.defaults import page_not_found, server_error

from toolops.api.errors import DATABASE_UNAVAILABLE, RETRY_AFTER_S, api_not_found, api_unavailable
from toolops.views.login import ConsoleLoginView
from traces.views.metrics import prometheus_metrics


def home(request: HttpRequest) -> HttpResponse:
    return HttpResponseRedirect("/console/")


urlpatterns = [
    path("", home),
    path("api/v1/", include("toolops.api.urls")),
    path("console/", include("toolops.console_urls")),
    # One login for the admin and the console: the same lockout, the same second factor.
    path("admin/login/", ConsoleLoginView.as_view(next_page="/admin/"), name="admin-login"),
    path("admin/", admin.site.urls),
    # For Prometheus: no console login (TOOLOPS_METRICS_TOKEN guards it when set).
    path("metrics", prometheus_metrics, name="metrics"),
]


def handler404(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if request.path.startswith("/api/"):
        return api_not_found(request, exception)
    return page_not_found(request, exception)


def handler500(request: HttpRequest) -> HttpResponse:
    """An error no view answered. The database out of reach is not a bug but a moment:
    503 with Retry-After — a problem body under /api/, a page that touches no database
    elsewhere. Called while the exception is handled, so sys.exc_info() names it."""
    if not isinstance(sys.exc_info()[1], DATABASE_UNAVAILABLE):
        return server_error(request)
    if request.path.startswith("/api/"):
        return api_unavailable(request)
    response = HttpResponse(render_to_string("503.html"), status=503)
    response["Retry-After"] = str(RETRY_AFTER_S)
    return response
