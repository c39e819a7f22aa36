"""The DBOS peer's ASGI application, served exactly like toolops.asgi:application. Importing
it launches DBOS in this process (as importing toolops.asgi sets Django up)."""

from __future__ import annotations

from bench.dbos_peer import app, launch

launch()
application = app
