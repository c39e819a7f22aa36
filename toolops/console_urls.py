from __future__ import annotations

from django.contrib.auth import views as auth_views
from django.urls import path

from . import views

app_name = "console"

urlpatterns = [
    path("login/", auth_views.LoginView.as_view(template_name="console/login.html"), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("", views.run_list, name="runs"),
    path("runs/<int:pk>/", views.run_detail, name="run-detail"),
    path("tools/", views.tool_list, name="tools"),
    path("tools/<str:name>/policy/", views.tool_policy_edit, name="tool-policy"),
    path("unknown/", views.unknown_list, name="unknown"),
    path("unknown/<int:pk>/settle/", views.unknown_settle, name="unknown-settle"),
    path("health/", views.tool_health, name="health"),
    path("health/<str:name>/force-open/", views.breaker_force_open, name="breaker-force-open"),
    path("health/<str:name>/reset/", views.breaker_reset, name="breaker-reset"),
]
