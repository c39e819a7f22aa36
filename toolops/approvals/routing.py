from __future__ import annotations

from django.urls import path

from . import consumers

websocket_urlpatterns = [
    path(consumers.PUSH_PATH.lstrip("/"), consumers.ApprovalsConsumer.as_asgi()),
]
