from __future__ import annotations

from django.urls import path
from drf_spectacular.views import SpectacularAPIView

from . import policy, views

urlpatterns = [
    # First: every tool call resolves here, so it is tried before the rest.
    path("runs/<str:run_id>/calls", views.CallCreateApi.as_view(), name="call-create"),
    path("runs", views.RunCreateApi.as_view(), name="run-create"),
    path("runs/<str:run_id>", views.RunDetailApi.as_view(), name="run-detail"),
    path("runs/<str:run_id>/complete", views.RunCompleteApi.as_view(), name="run-complete"),
    path("runs/<str:run_id>/abort", views.RunAbortApi.as_view(), name="run-abort"),
    path("calls/<str:call_id>", views.CallDetailApi.as_view(), name="call-detail"),
    path("tools", views.ToolListApi.as_view(), name="tool-list"),
    path("policy", policy.PolicyDetailApi.as_view(), name="policy-detail"),
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
]
