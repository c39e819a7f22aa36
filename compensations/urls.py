"""The support desk's pages, mounted in the console (toolops/console_urls.py)."""

from __future__ import annotations

from django.urls import path

from . import actions, views

urlpatterns = [
    path("tickets/", views.ticket_list, name="tickets"),
    path("tickets/bulk/", actions.tickets_bulk, name="tickets-bulk"),
    path("tickets/<int:pk>/", views.ticket_detail, name="ticket"),
    path("tickets/<int:pk>/assign/", actions.ticket_assign, name="ticket-assign"),
    path("tickets/<int:pk>/retry/", actions.ticket_retry, name="ticket-retry"),
    path("tickets/<int:pk>/resolve/", actions.ticket_resolve, name="ticket-resolve"),
    path("tickets/<int:pk>/comment/", actions.ticket_comment, name="ticket-comment"),
    path("tickets/<int:pk>/snooze/", actions.ticket_snooze_view, name="ticket-snooze"),
    path("tickets/<int:pk>/unsnooze/", actions.ticket_unsnooze_view, name="ticket-unsnooze"),
]
