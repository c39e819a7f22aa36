from __future__ import annotations

from django.contrib.auth import views as auth_views
from django.urls import include, path

from traces.views import full_args as traces_full_args
from traces.views import metrics as traces_metrics
from traces.views import timeline as traces_timeline

from .approvals import views as approvals
from .notify import hook_views as webhooks
from .notify import views as notify
from .views import (
    accounts,
    agents,
    audit,
    health,
    home,
    login,
    policy,
    policy_edit,
    policy_versions,
    runs,
    tools,
    unknown,
)

app_name = "console"

urlpatterns = [
    # Login: the password (axes counts failures per username and address), then a TOTP
    # code for users with a device (docs/accounts.md).
    path("login/", login.ConsoleLoginView.as_view(), name="login"),
    path("login/code/", login.login_code, name="login-code"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("account/two-factor/", accounts.two_factor, name="two-factor"),
    path("lockouts/", accounts.lockout_list, name="lockouts"),
    path("lockouts/unlock/", accounts.lockout_unlock, name="lockout-unlock"),
    path("agents/", agents.agent_list, name="agents"),
    # What needs the person now, by their role (toolops/views/home.py); the nav's live
    # counts, polled by every page (templates/console/_nav_counts.html).
    path("", home.home, name="home"),
    path("nav/counts/", home.nav_counts, name="nav-counts"),
    path("runs/", runs.run_list, name="runs"),
    # The run page is the run's timeline (traces/); a call's deep link lands on it.
    path("runs/<int:pk>/", traces_timeline.run_timeline, name="run-detail"),
    path("calls/<str:call_id>/", traces_timeline.call_detail, name="call"),
    path("tools/", tools.tool_list, name="tools"),
    path("tools/<str:name>/policy/", tools.tool_policy_edit, name="tool-policy"),
    path("agents/<int:pk>/rate-limit/", agents.agent_rate_limit_edit, name="agent-rate-limit"),
    # The agent policy (toolops/views/policy*.py): operators simulate, apply and roll back;
    # a version's page is every console user's (the approval and call pages link to it).
    path("policy/", policy.policy_home, name="policy"),
    path("policy/versions/<int:number>/", policy.policy_version, name="policy-version"),
    path("policy/validate/", policy_edit.policy_validate, name="policy-validate"),
    path("policy/simulate/", policy_edit.policy_simulate, name="policy-simulate"),
    path("policy/apply/", policy_edit.policy_apply, name="policy-apply"),
    path(
        "policy/versions/<int:number>/rollback/",
        policy_versions.policy_rollback,
        name="policy-rollback",
    ),
    path(
        "policy/versions/<int:number>/confirm/",
        policy_versions.policy_confirm,
        name="policy-confirm",
    ),
    path(
        "policy/versions/<int:number>/withdraw/",
        policy_versions.policy_withdraw,
        name="policy-withdraw",
    ),
    path("unknown/", unknown.unknown_list, name="unknown"),
    path("unknown/<int:pk>/settle/", unknown.unknown_settle, name="unknown-settle"),
    path("health/", health.tool_health, name="health"),
    path("health/<str:name>/force-open/", health.breaker_force_open, name="breaker-force-open"),
    path("health/<str:name>/reset/", health.breaker_reset, name="breaker-reset"),
    path("metrics/", traces_metrics.metrics_page, name="metrics"),
    path("runs/<int:pk>/abort/", runs.run_abort, name="run-abort"),
    path("search/", runs.search, name="search"),
    # Every human action, append-only (toolops/audit/): operators and superusers.
    path("audit/", audit.audit_log, name="audit"),
    # A call's full, unredacted args and result: view_full_args only, every look audited.
    path("calls/<str:call_id>/args/", traces_full_args.call_args, name="call_args"),
    # The reviewer queue (toolops/approvals/): an approval's page is its API `url`.
    path("approvals/", approvals.approval_queue, name="approvals"),
    path("approvals/<str:approval_id>/", approvals.approval_detail, name="approval"),
    path("approvals/<str:approval_id>/decide/", approvals.approval_decide, name="approval-decide"),
    # The support desk (compensations/): its pages share the console's shell and names.
    path("", include("compensations.urls")),
    # Notifications (toolops/notify/): each person's choices, and the operators' outbox.
    path("account/notifications/", notify.profile, name="account-notifications"),
    path("notifications/", notify.outbox, name="notifications"),
    path("notifications/<int:pk>/retry/", notify.outbox_retry, name="notification-retry"),
    # Where each group's chat messages go: the environment's, and those added here.
    path("notifications/webhooks/", webhooks.webhook_list, name="webhooks"),
    path("notifications/webhooks/add/", webhooks.webhook_add, name="webhook-add"),
    path("notifications/webhooks/test/", webhooks.webhook_test, name="webhook-test"),
    path("notifications/webhooks/<int:pk>/remove/", webhooks.webhook_remove, name="webhook-remove"),
]
