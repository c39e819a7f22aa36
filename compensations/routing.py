from __future__ import annotations

from django.urls import path

from . import consumers

websocket_urlpatterns = [
    path("ws/tickets/", consumers.TicketsConsumer.as_asgi()),
]
