from __future__ import annotations

from django.apps import AppConfig

from . import otel


class TracesConfig(AppConfig):
    name = "traces"

    def ready(self) -> None:
        # Before any handler loads its middleware (the Django instrumentation adds one),
        # and in every process: web, worker, beat, management commands.
        otel.setup()
