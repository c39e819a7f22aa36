"""ToolOps settings, read from the environment (API.md "Processes and settings")."""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.core.management.utils import get_random_secret_key

from toolops.api import bounds
from toolops.envs import (
    args_keys,
    database,
    envbool,
    envfloat,
    envint,
    envint_within,
    kept_secret,
    trusted_proxies,
)

BASE_DIR = Path(__file__).resolve().parent.parent

DATA_DIR = Path(os.getenv("TOOLOPS_DATA_DIR") or BASE_DIR / "var")
DATA_DIR.mkdir(parents=True, exist_ok=True)

DEBUG = envbool("DJANGO_DEBUG", "0")
# Without a configured key each process would invent its own, and sessions signed by
# one web process would be rejected by the next: keep one per data directory.
SECRET_KEY = os.getenv("DJANGO_SECRET_KEY", "")
if not SECRET_KEY:
    SECRET_KEY = kept_secret(DATA_DIR / "secret_key", get_random_secret_key()).strip()

ALLOWED_HOSTS = [
    h.strip()
    for h in os.getenv("DJANGO_ALLOWED_HOSTS", "localhost,127.0.0.1").split(",")
    if h.strip()
]

HTTPS = envbool("TOOLOPS_HTTPS", "0")
SESSION_COOKIE_SECURE = HTTPS
CSRF_COOKIE_SECURE = HTTPS
SECURE_SSL_REDIRECT = HTTPS
SECURE_HSTS_SECONDS = 31_536_000 if HTTPS else 0
SECURE_HSTS_INCLUDE_SUBDOMAINS = HTTPS
# HSTS preload binds every subdomain for months: opt-in only, and Django's nag about it
# (security.W021) is silenced unless the deployment opted in.
SECURE_HSTS_PRELOAD = HTTPS and envbool("TOOLOPS_HSTS_PRELOAD", "0")
SILENCED_SYSTEM_CHECKS = [] if SECURE_HSTS_PRELOAD else ["security.W021"]
SESSION_COOKIE_HTTPONLY = True
X_FRAME_OPTIONS = "DENY"


# The proxies in front of ToolOps: only they may say (X-Forwarded-Proto/-For) what scheme
# and address the client used; everyone else's X-Forwarded-* headers are dropped before
# Django sees them (toolops/proxies.py, docs/headers.md). SECURE_PROXY_SSL_HEADER stays off.
TOOLOPS_TRUSTED_PROXIES = trusted_proxies(os.getenv("TOOLOPS_TRUSTED_PROXIES", ""))
SECURE_PROXY_SSL_HEADER = None

# Content-Security-Policy (django-csp) on every page of the console and admin: scripts and
# styles only from this origin's static files, never inline — a value a model or a
# downstream wrote that slips past escaping still cannot run. htmx is told (base.html's
# htmx-config) not to inject its inline indicator style and not to eval. connect-src
# 'self' covers the live pages' WebSockets to this host (ws:/wss:, CSP Level 3).
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "img-src": ["'self'"],
        "connect-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'none'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    }
}

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "django_htmx",
    "template_partials",
    "csp",
    "channels",
    "axes",
    "django_otp",
    "django_otp.plugins.otp_totp",
    "toolops",
    "compensations",
    "traces",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "toolops.csp.ContentSecurityPolicyMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # People's accounts (docs/accounts.md): which OTP device verified this session, idle
    # sessions end, and the two-factor gate; the lockout page last, as axes asks.
    "django_otp.middleware.OTPMiddleware",
    "toolops.accounts.middleware.IdleSessionMiddleware",
    "toolops.accounts.middleware.TwoFactorMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "toolops.urls"
ASGI_APPLICATION = "toolops.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    }
]


DATABASES = {"default": database(DATA_DIR)}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "/console/login/"
LOGIN_REDIRECT_URL = "/console/"
LOGOUT_REDIRECT_URL = "/console/login/"

# People's accounts (docs/accounts.md). The executor API authenticates agents by token and
# never reads a session, so all of this costs console requests only.
# Axes first: it refuses a locked-out username and address before any password is checked.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
# A console session ends after 8 idle hours. IdleSessionMiddleware slides it on a person's
# requests (at most one session write a minute), not on a live page's polling.
SESSION_COOKIE_AGE = 8 * 3600
SESSION_SAVE_EVERY_REQUEST = False
# Login lockout (API.md): 5 failures for one username from one address lock that pair for
# 15 minutes; other usernames, and the same username from elsewhere, are not affected.
# Counted in the database, so every web process shares the count.
AXES_HANDLER = "axes.handlers.database.AxesDatabaseHandler"
AXES_FAILURE_LIMIT = 5
AXES_COOLOFF_TIME = timedelta(minutes=15)
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
# A try during the lockout (the right password too) is refused without being counted, so
# the lock ends 15 minutes after the failure that set it, as the 429 page says.
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False
AXES_LOCKOUT_CALLABLE = "toolops.accounts.lockout.lockout_response"
AXES_CLIENT_IP_CALLABLE = "toolops.accounts.lockout.client_address"
# The code of the two-factor step is a credential too: never kept in the attempt's record.
AXES_SENSITIVE_PARAMETERS = ["username", "ip_address", "code"]
# One row per successful login, never purged: the audit log records what matters.
AXES_DISABLE_ACCESS_LOG = True
# Lockouts are seen and cleared on /console/lockouts/ (operators), not edited in the admin.
AXES_ENABLE_ADMIN = False
# Two-factor (TOTP, django-otp): optional for everyone; with TOOLOPS_REQUIRE_2FA=1,
# reviewers and superusers must enrol before any other console or admin page opens.
TOOLOPS_REQUIRE_2FA = envbool("TOOLOPS_REQUIRE_2FA", "0")
OTP_TOTP_ISSUER = "ToolOps"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "/static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = DATA_DIR / "static"

# Bodies are capped at 1 MiB by toolops.bodies.BodyLimit on every method (chunked bodies
# too); this is the same cap for requests that reach Django another way.
DATA_UPLOAD_MAX_MEMORY_SIZE = 1024 * 1024
BODY_LIMIT_BYTES = 1024 * 1024
# A request's body must arrive whole within this many seconds of its headers, or it is
# answered 408 and its connection closed (toolops/bodies.py): 1 MiB at 100 kB/s fits.
TOOLOPS_BODY_READ_TIMEOUT_S = envfloat("TOOLOPS_BODY_READ_TIMEOUT_S", 20.0)
if not 0 < TOOLOPS_BODY_READ_TIMEOUT_S <= 3600:  # also refuses nan and inf
    raise ImproperlyConfigured(
        "TOOLOPS_BODY_READ_TIMEOUT_S must be a positive number of seconds (at most 3600), "
        f"got {os.getenv('TOOLOPS_BODY_READ_TIMEOUT_S')!r}"
    )
# A downstream's response body is read up to this many bytes; a longer one is not read
# and its attempt fails saying so (toolops/tools/http.py).
TOOLOPS_DOWNSTREAM_MAX_BYTES = envint("TOOLOPS_DOWNSTREAM_MAX_BYTES", 10 * 1024 * 1024)
if TOOLOPS_DOWNSTREAM_MAX_BYTES < 1:
    raise ImproperlyConfigured(
        f"TOOLOPS_DOWNSTREAM_MAX_BYTES must be at least 1, got {TOOLOPS_DOWNSTREAM_MAX_BYTES}"
    )

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["toolops.api.auth.BearerTokenAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PARSER_CLASSES": ["toolops.api.parsers.StrictJSONParser"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "EXCEPTION_HANDLER": "toolops.api.errors.problem_exception_handler",
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "UNAUTHENTICATED_USER": None,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "ToolOps executor API",
    "DESCRIPTION": "Run agent tool calls safely: idempotency, retries, breakers, approvals.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_AUTHENTICATION": [],
    "SERVE_PERMISSIONS": ["rest_framework.permissions.AllowAny"],
}

# Redis (REDIS_URL): the Channels layer and the cache shared by every process.
from toolops.conf.redis import *  # noqa: E402, F403

# Celery: without CELERY_BROKER_URL, an embedded broker that needs no server — kombu's
# filesystem transport, its folders under the data directory, with messages written
# whole and claimed by an atomic rename (toolops/broker.py says why).
BROKER_DIR = DATA_DIR / "broker"
CELERY_BROKER_URL = os.getenv("CELERY_BROKER_URL", "") or "filesystem://"
if CELERY_BROKER_URL == "filesystem://":
    CELERY_BROKER_TRANSPORT = "toolops.broker:Transport"
    for sub in ("out", "processed", "control"):
        (BROKER_DIR / sub).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(BROKER_DIR / "out"),
        "data_folder_out": str(BROKER_DIR / "out"),
        "processed_folder": str(BROKER_DIR / "processed"),
        "store_processed": False,
        "control_folder": str(BROKER_DIR / "control"),
    }
else:
    # Redis (and SQS) redeliver a message that was not acknowledged within the visibility
    # timeout: keep it well above the longest task (a run's undos, each up to 5 attempts
    # with waits capped at 30 s), or a slow saga would be delivered twice while it runs.
    # A broker that does not answer must not hold a request: 1 s to connect, 5 s for a
    # reply (the worker's BRPOP waits 1 s); connecting and sending are each tried twice
    # at once (kombu waits 2 s between tries) before the wake-up is given up, logged, and
    # left to the sweeps (toolops/queue.py). A worker's own reconnecting is not bound by
    # this (CELERY_BROKER_CONNECTION_MAX_RETRIES below).
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "visibility_timeout": 2 * 3600,
        "socket_connect_timeout": 1.0,
        "socket_timeout": 5.0,
        "max_retries": 1,
        "interval_start": 0.1,
        "interval_step": 0,
        "interval_max": 0.1,
    }
    CELERY_TASK_PUBLISH_RETRY_POLICY = {
        "max_retries": 1,
        "interval_start": 0,
        "interval_step": 0,
        "interval_max": 0,
    }
CELERY_TASK_IGNORE_RESULT = True
# Delivery the saga can trust: a message is acknowledged only after its task finished
# (late acks), handed back when the worker process dies mid-task (reject on worker lost),
# and a worker holds one message at a time (prefetch 1), so a crash strands no others.
# Tasks are safe to run twice; the database, not the broker, says what is left to do.
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# A worker outlives a broker that went away (a Redis restart, an outage): it reconnects
# with growing pauses for as long as it takes, rather than exiting after 100 tries.
CELERY_BROKER_CONNECTION_MAX_RETRIES = None
# The worker logs through LOGGING above (and its redacting filter), not handlers of its own.
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
CELERY_BEAT_SCHEDULE_FILENAME = str(DATA_DIR / "celerybeat-schedule")
# The periodic tasks beat runs: the sweeps, reconciling, retention.
from toolops.conf.schedule import *  # noqa: E402, F403

# ToolOps' own knobs.
TOOLOPS_TOOLS_FILE = os.getenv("TOOLOPS_TOOLS_FILE", "")
TOOLOPS_CLAIM_LEASE_S = envfloat("TOOLOPS_CLAIM_LEASE_S", 30.0)
# The saga worker's: the sweep's grace, an undo's wait for its breaker.
from toolops.conf.saga import *  # noqa: E402, F403

# An approved call whose worker message was lost is started by the sweep after this.
TOOLOPS_APPROVAL_GRACE_S = envfloat("TOOLOPS_APPROVAL_GRACE_S", 10.0)
TOOLOPS_IDEMPOTENCY_TTL_S = envfloat("TOOLOPS_IDEMPOTENCY_TTL_S", 7 * 24 * 3600.0)
# Serving agents: the API threads, fairness between agents, the MCP server.
from toolops.conf.agents import *  # noqa: E402, F403
from toolops.conf.faults import *  # noqa: E402, F403 - crash points, for fault tests

# Ended runs (calls, attempts: the stored spans), old attempts and replay counts are
# purged this many days on (docs/retention.md). Checked here, so that a bad value stops
# the process at start rather than failing the purge an hour later; at most a century,
# which keeps "now minus retention" a valid date.
TOOLOPS_RETENTION_DAYS = envfloat("TOOLOPS_RETENTION_DAYS", 30.0)
if not 0 < TOOLOPS_RETENTION_DAYS <= 36500:  # also refuses nan and inf
    raise ImproperlyConfigured(
        "TOOLOPS_RETENTION_DAYS must be a positive number of days (at most 36500), "
        f"got {os.getenv('TOOLOPS_RETENTION_DAYS')!r}"
    )
TOOLOPS_POLICY_CACHE_S = envfloat("TOOLOPS_POLICY_CACHE_S", 5.0)
# The agent policy (docs/policy.md): "1" makes an operator's apply in the console wait
# for a second operator's confirmation.
TOOLOPS_POLICY_TWO_PERSON = envbool("TOOLOPS_POLICY_TWO_PERSON", "0")
# A run's budget when its body gives none, held to what the API takes in a body (and the
# run's columns store): past them, every run insert would fail on PostgreSQL.
TOOLOPS_DEFAULT_MAX_ATTEMPTS = envint_within(
    "TOOLOPS_DEFAULT_RUN_MAX_ATTEMPTS", 1, bounds.MAX_ATTEMPTS_MAX
)
TOOLOPS_DEFAULT_MAX_SECONDS = envint_within(
    "TOOLOPS_DEFAULT_RUN_MAX_SECONDS", 1, int(bounds.MAX_SECONDS_MAX)
)
TOOLOPS_DEFAULT_MAX_TOKENS = envint_within(
    "TOOLOPS_DEFAULT_RUN_MAX_TOKENS", 0, bounds.MAX_TOKENS_MAX
)
# /metrics is open unless this is set; then a scraper sends `Authorization: Bearer <it>`.
TOOLOPS_METRICS_TOKEN = os.getenv("TOOLOPS_METRICS_TOKEN", "").strip()
# Spans carry an HMAC of a call's idempotency key under this key, never the key itself
# (traces/otel.py); unset, a key derived from SECRET_KEY under a label of its own.
TOOLOPS_SPAN_KEY = os.getenv("TOOLOPS_SPAN_KEY", "")
# A web process answers /metrics from its last scrape for this long: the whole-table
# aggregates run at most once per window per process, however many scrapes arrive.
TOOLOPS_METRICS_CACHE_S = envfloat("TOOLOPS_METRICS_CACHE_S", 5.0)
if not 0 <= TOOLOPS_METRICS_CACHE_S <= 3600:  # also refuses nan and inf
    raise ImproperlyConfigured(
        "TOOLOPS_METRICS_CACHE_S must be 0 to 3600 seconds, "
        f"got {os.getenv('TOOLOPS_METRICS_CACHE_S')!r}"
    )
# The keys that seal full args and results at rest (traces/vault.py): the first encrypts,
# every one decrypts; rotate with `manage.py rotate_args_keys`.
TOOLOPS_ARGS_KEYS = args_keys(DATA_DIR)
# Unset, the key above was made on this host (checks.py warns where that will not do).
TOOLOPS_ARGS_KEYS_SET = bool(os.getenv("TOOLOPS_ARGS_KEYS", "").strip())

# logging.config.dictConfig's schema: its values are of many kinds.
LOGGING: dict[str, Any] = {
    "version": 1,
    "disable_existing_loggers": False,
    # No log line carries an e-mail address or a card number, whoever wrote it.
    "filters": {"redact": {"()": "traces.sensitive.RedactingFilter"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "filters": ["redact"]}},
    "root": {"handlers": ["console"], "level": os.getenv("TOOLOPS_LOG_LEVEL", "WARNING")},
}

# The console search finds a run by its calls' searchable values (an order id, an e-mail),
# stored only as an HMAC under this key (traces/search.py); unset, a key derived from
# SECRET_KEY under a label of its own. Changing either leaves the rows written before
# unfindable until `manage.py reindex_search` (docs/search.md).
TOOLOPS_SEARCH_KEY = os.getenv("TOOLOPS_SEARCH_KEY", "")
# Idle runs (toolops/idle.py): a running run whose agent made no call for
# TOOLOPS_RUN_IDLE_FLAG_S is flagged "no call for N min" on the console; after
# TOOLOPS_RUN_IDLE_ABORT_S (0: never) it is aborted as an operator would. Checked every
# minute: an hour's limit is kept within a minute.
TOOLOPS_RUN_IDLE_FLAG_S = envfloat("TOOLOPS_RUN_IDLE_FLAG_S", 600.0)
TOOLOPS_RUN_IDLE_ABORT_S = envfloat("TOOLOPS_RUN_IDLE_ABORT_S", 3600.0)
for _name in ("TOOLOPS_RUN_IDLE_FLAG_S", "TOOLOPS_RUN_IDLE_ABORT_S"):
    if globals()[_name] < 0:
        raise ImproperlyConfigured(f"{_name} must be 0 (never) or a number of seconds")
# Notifications (docs/notifications.md): mail, the groups' webhooks, sending and folding.
from toolops.conf.notify import *  # noqa: E402, F403

EMAIL_FILE_PATH = os.getenv("EMAIL_FILE_PATH", str(DATA_DIR / "mail"))
# What was sent to whom and when, one line each (at INFO, whatever the root's level).
LOGGING["formatters"] = {"stamped": {"format": "%(asctime)s %(message)s"}}
LOGGING["handlers"]["stamped"] = {
    "class": "logging.StreamHandler",
    "filters": ["redact"],
    "formatter": "stamped",
}
LOGGING["loggers"] = {
    "toolops.notify": {
        "level": os.getenv("TOOLOPS_NOTIFY_LOG_LEVEL", "INFO"),
        "handlers": ["stamped"],
        "propagate": False,
    }
}
