"""The physical endpoint's ASGI application, served exactly like toolops.asgi:application.
Importing it opens the endpoint's connection pool in this process (as importing
toolops.asgi sets Django up)."""

from __future__ import annotations

from bench.physical import app, launch

launch()
application = app
