from __future__ import annotations

from django.contrib.auth import views as auth_views
from django.urls import include, path

from traces.views import full_args as traces_full_args
from traces.views import metrics as traces_metrics
from traces.views import timeline as traces_timeline

from .approvals import views as approvals
from .views import agents, health, runs, tools, unknown

app_name = "console"

urlpatterns = [
    path("login/", auth_views.LoginView.as_view(template_name="console/login.html"), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("", runs.run_list, name="runs"),
    # The run page is the run's timeline (traces/); a call's deep link lands on it.
    path("runs/<int:pk>/", traces_timeline.run_timeline, name="run-detail"),
    path("calls/<str:call_id>/", traces_timeline.call_detail, name="call"),
    path("tools/", tools.tool_list, name="tools"),
    path("tools/<str:name>/policy/", tools.tool_policy_edit, name="tool-policy"),
    path("agents/", agents.agent_list, name="agents"),
    path("agents/<int:pk>/rate-limit/", agents.agent_rate_limit_edit, name="agent-rate-limit"),
    path("unknown/", unknown.unknown_list, name="unknown"),
    path("unknown/<int:pk>/settle/", unknown.unknown_settle, name="unknown-settle"),
    path("health/", health.tool_health, name="health"),
    path("health/<str:name>/force-open/", health.breaker_force_open, name="breaker-force-open"),
    path("health/<str:name>/reset/", health.breaker_reset, name="breaker-reset"),
    path("metrics/", traces_metrics.metrics_page, name="metrics"),
    path("runs/<int:pk>/abort/", runs.run_abort, name="run-abort"),
    path("search/", runs.search, name="search"),
    # A call's full, unredacted args and result: view_full_args only, every look audited.
    path("calls/<str:call_id>/args/", traces_full_args.call_args, name="call_args"),
    # The reviewer queue (toolops/approvals/): an approval's page is its API `url`.
    path("approvals/", approvals.approval_queue, name="approvals"),
    path("approvals/<str:approval_id>/", approvals.approval_detail, name="approval"),
    path("approvals/<str:approval_id>/decide/", approvals.approval_decide, name="approval-decide"),
    # The support desk (compensations/): its pages share the console's shell and names.
    path("", include("compensations.urls")),
]
