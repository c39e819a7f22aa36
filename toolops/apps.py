from __future__ import annotations

from django.apps import AppConfig
from django.conf import settings

from toolops import crash, jsonbound

# ToolOps' Celery app, made the current one in every Django process, so that the tasks'
# `.delay` and toolops.queue use its broker (toolops/__init__.py no longer loads it).
from toolops.celery import app as celery_app  # noqa: F401


class ToolopsConfig(AppConfig):
    name = "toolops"
    verbose_name = "ToolOps"

    def ready(self) -> None:
        # Django's documented place for these: each registers something on import, and
        # needs the app registry ready (they import models).
        from . import checks  # noqa: F401, PLC0415  (registers the catalog check)
        from .accounts import signals  # noqa: F401, PLC0415  (login and lockout receivers)
        from .tools import builtin  # noqa: F401, PLC0415  (registers the Python tools)

        # How wide JSON from outside may be, for every parse that does not say otherwise.
        jsonbound.configure(
            jsonbound.Limits(
                values=settings.TOOLOPS_JSON_MAX_VALUES,
                keys=settings.TOOLOPS_JSON_MAX_KEYS,
                items=settings.TOOLOPS_JSON_MAX_ITEMS,
            )
        )
        # Fault tests only: TOOLOPS_CRASH_AT, read once by the settings.
        crash.arm(settings.TOOLOPS_CRASH_AT, seed=settings.TOOLOPS_CRASH_SEED)
