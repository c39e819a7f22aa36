from __future__ import annotations

from django.urls import path

from .views import FloorCallApi, FloorPingApi

urlpatterns = [
    path("floor/ping", FloorPingApi.as_view(), name="floor-ping"),
    path("floor/runs/<str:run_id>/calls", FloorCallApi.as_view(), name="floor-call"),
]
