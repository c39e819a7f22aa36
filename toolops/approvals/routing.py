from __future__ import annotations

from django.urls import path

from . import consumers

websocket_urlpatterns = [
    # django-stubs type path()'s view as a Django view; Channels routes an ASGI app with it.
    path(consumers.PUSH_PATH.lstrip("/"), consumers.ApprovalsConsumer.as_asgi()),  # type: ignore[arg-type]
]
