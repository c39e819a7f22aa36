from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import include, path
from django.views.defaults import page_not_found

from toolops.api.errors import api_not_found
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
    return page_not_found(request, exception)  # type: ignore[arg-type]
