"""`manage.py check` validates the tool catalog: a bad file is an error naming the tool
and field; an unsafe write nobody can reconcile is a warning. It also warns of settings
that work on one machine and fail on several."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core import checks
from django.db import DatabaseError

from toolops.policy import versions
from toolops.policy.document import PolicyError
from toolops.tools import registry
from toolops.tools.catalog import CatalogError, cross_check


@checks.register("toolops")
def check_tool_catalog(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    registry.reset()
    try:
        tools = registry.load()
    except CatalogError as exc:
        return [
            checks.Error(
                str(exc),
                hint=f"Fix the tool catalog ({settings.TOOLOPS_TOOLS_FILE}).",
                id="toolops.E001",
            )
        ]
    return [
        checks.Warning(p.removeprefix("warning:"), id="toolops.W001")
        for p in cross_check(tools)
        if p.startswith("warning:")
    ]


@checks.register(checks.Tags.security, deploy=True)
def check_https(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    if settings.HTTPS:
        return []
    return [
        checks.Warning(
            "TOOLOPS_HTTPS is off: cookies are not secure and there is no HSTS or SSL redirect.",
            hint="Set TOOLOPS_HTTPS=1 when ToolOps is served over HTTPS.",
            id="toolops.W002",
        )
    ]


@checks.register("toolops")
def check_args_keys(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    # Without TOOLOPS_ARGS_KEYS each host makes a key of its own in its data directory.
    # On PostgreSQL, processes on several hosts are likely: a worker then cannot decrypt
    # what a web process sealed, and a call it should send, look up or undo fails instead.
    if settings.TOOLOPS_ARGS_KEYS_SET:
        return []
    if not settings.DATABASES["default"]["ENGINE"].endswith("postgresql"):
        return []
    return [
        checks.Warning(
            "TOOLOPS_ARGS_KEYS is not set: this host made its own key for sealing args "
            f"({settings.DATA_DIR / 'args_keys'}); processes on other hosts cannot decrypt "
            "what it seals.",
            hint="Set TOOLOPS_ARGS_KEYS to the same keys on every host (docs/sensitive-data.md "
            '"Keys and rotation"); the key made here can be copied from its file.',
            id="toolops.W003",
        )
    ]


@checks.register(checks.Tags.security, deploy=True)
def check_metrics_token(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    # /metrics needs no login (a scraper has no session): without a token anyone who can
    # reach the site reads every tool's name, call volumes, failure rates and breakers.
    if settings.TOOLOPS_METRICS_TOKEN:
        return []
    return [
        checks.Warning(
            "TOOLOPS_METRICS_TOKEN is not set: /metrics answers anyone, with every tool's "
            "name, call counts, failures and breaker states.",
            hint="Set TOOLOPS_METRICS_TOKEN to a long random string and have the scraper "
            "send `Authorization: Bearer <it>` (docs/metrics.md).",
            id="toolops.W010",
        )
    ]


@checks.register("toolops")
def check_crash_points(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    # Crash points kill the process on purpose (toolops/crash.py): for fault tests only.
    if not settings.TOOLOPS_CRASH_AT or settings.DEBUG:
        return []
    return [
        checks.Warning(
            "TOOLOPS_CRASH_AT is set: this process kills itself (SIGKILL) at the crash "
            f"points {', '.join(settings.TOOLOPS_CRASH_AT)}.",
            hint="Unset TOOLOPS_CRASH_AT: crash points are for fault tests, never a deployment.",
            id="toolops.W011",
        )
    ]


@checks.register("toolops", checks.Tags.database)
def check_agent_policy(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    # A policy validated when it was applied; the catalog or the agents may have changed
    # since (a rule's field gone, an agent renamed). It stays in force as it is: say so.
    if not kwargs.get("databases"):
        return []
    try:
        version = versions.active_version()
    except DatabaseError:
        return []  # not migrated yet: nothing is in force
    if version is None:
        return []
    try:
        versions.validate(version.text)
    except PolicyError as exc:
        return [
            checks.Warning(
                f"The agent policy in force (v{version.number}) no longer validates "
                f"against the catalog and the agents: {exc}",
                hint="Apply a corrected policy (manage.py policy apply, or /console/policy/).",
                id="toolops.W012",
            )
        ]
    return []
