from __future__ import annotations

from django.apps import AppConfig


class CompensationsConfig(AppConfig):
    name = "compensations"
