"""The support desk's pages, mounted in the console (toolops/console_urls.py)."""

from __future__ import annotations

from django.urls import path

from . import views

urlpatterns = [
    path("tickets/", views.ticket_list, name="tickets"),
    path("tickets/bulk/", views.tickets_bulk, name="tickets-bulk"),
    path("tickets/<int:pk>/", views.ticket_detail, name="ticket"),
    path("tickets/<int:pk>/assign/", views.ticket_assign, name="ticket-assign"),
    path("tickets/<int:pk>/retry/", views.ticket_retry, name="ticket-retry"),
    path("tickets/<int:pk>/resolve/", views.ticket_resolve, name="ticket-resolve"),
    path("tickets/<int:pk>/comment/", views.ticket_comment, name="ticket-comment"),
]
