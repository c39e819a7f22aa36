from __future__ import annotations

from django.apps import AppConfig


class ToolopsConfig(AppConfig):
    name = "toolops"
    verbose_name = "ToolOps"

    def ready(self) -> None:
        from . import checks  # noqa: F401  (registers the catalog check)
        from .accounts import signals  # noqa: F401  (login and lockout receivers)
        from .tools import builtin  # noqa: F401  (registers the Python tools)
