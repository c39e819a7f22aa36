"""ToolOps' settings with one change, for `run.py --study` only: what a change would be
worth, measured before anyone makes it. `BENCH_VARIANT` names it:

- `lean`: without the console's middleware (session, CSRF, auth, messages, clickjacking,
  htmx) — each sync hook of a MiddlewareMixin middleware is a thread hop under ASGI;
- `prepared`: psycopg server-side binding with automatic prepared statements (a statement
  is prepared on a connection after its 5th run; Django's default turns this off).

Not a way to deploy: the console needs its middleware, and prepared statements do not
survive a transaction-pooling pgbouncer older than 1.21."""

from __future__ import annotations

import os

from toolops.settings import *  # noqa: F403
from toolops.settings import DATABASES

VARIANT = os.environ.get("BENCH_VARIANT", "")

if VARIANT == "lean":
    MIDDLEWARE = [
        "django.middleware.security.SecurityMiddleware",
        "django.middleware.common.CommonMiddleware",
    ]
elif VARIANT == "prepared":
    DATABASES["default"]["OPTIONS"] = {
        **DATABASES["default"].get("OPTIONS", {}),
        "server_side_binding": True,
        "prepare_threshold": 5,
    }
else:
    raise RuntimeError(f"BENCH_VARIANT must be lean or prepared, not {VARIANT!r}")
