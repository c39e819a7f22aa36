"""The floor's ASGI application, served exactly like toolops.asgi:application."""

from __future__ import annotations

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.floor.settings")

from django.core.asgi import get_asgi_application  # noqa: E402

application = get_asgi_application()
