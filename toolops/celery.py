"""The Celery app. The database is the queue; the broker only wakes workers."""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "toolops.settings")

app = Celery("toolops")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
