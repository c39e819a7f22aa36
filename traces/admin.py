"""Looks at full args recorded before the one audit log (toolops/audit/, which records
them now), in the admin: read-only and never deleted (an audit is not edited)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin

from .models import FullArgsRead


@admin.register(FullArgsRead)
class FullArgsReadAdmin(admin.ModelAdmin):
    list_display = ("at", "user", "call_ref", "purpose")
    list_filter = ("purpose",)
    search_fields = ("call_ref", "user__username")
    date_hierarchy = "at"

    def has_add_permission(self, request: Any) -> bool:
        return False

    def has_change_permission(self, request: Any, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: Any, obj: Any = None) -> bool:
        return False
