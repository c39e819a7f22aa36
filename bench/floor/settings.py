"""Settings of the floor project: the same database and pool configuration as
toolops/settings.py, DRF, and nothing else — no middleware, no authentication, no
sessions."""

from __future__ import annotations

import os

from toolops import settings as _toolops

SECRET_KEY = os.getenv("DJANGO_SECRET_KEY") or "bench-floor-not-secret"
DEBUG = False
ALLOWED_HOSTS = ["localhost", "127.0.0.1", "testserver"]

INSTALLED_APPS = [
    "django.contrib.contenttypes",
    "django.contrib.auth",
    "rest_framework",
    "bench.floor.app",
]
MIDDLEWARE: list[str] = []
ROOT_URLCONF = "bench.floor.urls"
ASGI_APPLICATION = "bench.floor.asgi.application"


# The very same database and pool configuration as ToolOps (a psycopg pool per process,
# CONN_MAX_AGE 0, whatever OPTIONS toolops/settings.py sets), taken from it rather than
# copied, so that a change there reaches the floor too.
DATABASES = {"default": dict(_toolops.DATABASES["default"])}
if DATABASES["default"]["ENGINE"] != "django.db.backends.postgresql":
    raise RuntimeError("the floor runs on PostgreSQL only (set DATABASE_URL)")
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
USE_TZ = True
TIME_ZONE = "UTC"
USE_I18N = False

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.AllowAny"],
    "DEFAULT_PARSER_CLASSES": ["rest_framework.parsers.JSONParser"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "UNAUTHENTICATED_USER": None,
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": "WARNING"},
}
