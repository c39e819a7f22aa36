"""Django admin for ToolOps' records. Executor records are read-only here, and none of
them can be deleted, not even by a superuser: the executor owns them, an edited attempt or
claim would make the record lie, and a deleted idempotency record lets an irreversible
write run again. Runs and calls (with their attempts, the stored spans) go only by
retention (traces/retention.py), which knows what still needs them. The audit log is
read-only and kept for ever (toolops/audit/)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.db import transaction
from django.db.models import QuerySet
from django.http import HttpRequest

from toolops import services
from toolops.audit.services import Action, audit_record
from toolops.forms import ToolPolicyForm
from toolops.models import (
    Agent,
    Attempt,
    AuditEntry,
    IdempotencyRecord,
    Run,
    ToolCall,
    ToolPolicy,
)
from toolops.tools import registry
from toolops.tools.catalog import CatalogError
from toolops.tools.spec import ToolSpec


class ReadOnlyAdmin(admin.ModelAdmin):
    """Seen, never added, changed or deleted (the delete view and action answer 403)."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Agent)
class AgentAdmin(admin.ModelAdmin):
    list_display = ("name", "token_hint", "is_active", "rate_limit_per_minute", "created_at")
    list_filter = ("is_active",)
    search_fields = ("name", "token_hint")
    # Tokens are never stored; even their hash stays read-only. A new agent and its token
    # come from `manage.py create_agent NAME`, which prints the token once.
    fields = (
        "name",
        "owner",
        "is_active",
        "rate_limit_per_minute",
        "token_hint",
        "token_hash",
        "created_at",
    )
    readonly_fields = ("token_hint", "token_hash", "created_at")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False


class AttemptInline(admin.TabularInline):
    # Attempts are the stored spans and the evidence a person settles an unknown outcome
    # from: never added, edited or deleted by hand (retention removes them).
    model = Attempt
    extra = 0
    can_delete = False
    fields = (
        "number",
        "purpose",
        "started_at",
        "duration_ms",
        "waited_ms",
        "http_status",
        "outcome",
        "reason",
        "error",
        "downstream_request_id",
        "span_id",
    )
    readonly_fields = fields

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Run)
class RunAdmin(ReadOnlyAdmin):
    list_display = ("run_id", "agent", "status", "attempts_used", "tokens_used", "created_at")
    list_filter = ("status",)
    search_fields = ("run_id", "trace_id")
    list_select_related = ("agent",)
    date_hierarchy = "created_at"


@admin.register(ToolCall)
class ToolCallAdmin(ReadOnlyAdmin):
    list_display = ("tool_call_id", "call_id", "run", "step_index", "tool", "status", "attempts")
    list_filter = ("status", "tool")
    search_fields = ("tool_call_id", "call_id")
    list_select_related = ("run",)
    inlines = (AttemptInline,)


@admin.register(IdempotencyRecord)
class IdempotencyRecordAdmin(ReadOnlyAdmin):
    list_display = ("key", "call_ref", "tool", "state", "fence", "lease_until", "expires_at")
    list_filter = ("state", "tool")
    search_fields = ("key", "call_ref")


class ToolPolicyAdminForm(ToolPolicyForm):
    """The console's validation, plus the tool name (which must be a registered tool)."""

    class Meta(ToolPolicyForm.Meta):
        fields = ("tool", *registry.POLICY_FIELDS)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        instance = kwargs.get("instance")
        spec = _catalog_spec(instance.tool if instance is not None else "")
        super().__init__(*args, spec=spec, **kwargs)

    def clean_tool(self) -> str:
        name: str = self.cleaned_data["tool"]
        self.spec = _catalog_spec(name)
        if self.spec.name != name:
            raise forms.ValidationError(f"There is no tool named {name!r}.")
        return name


def _catalog_spec(name: str) -> ToolSpec:
    """The tool's catalog declaration; for an unknown name, the built-in defaults."""
    try:
        spec = registry.load().get(name)
    except CatalogError:
        spec = None
    return spec or ToolSpec(name="", kind="read")


@admin.register(ToolPolicy)
class ToolPolicyAdmin(admin.ModelAdmin):
    form = ToolPolicyAdminForm
    list_display = ("tool", *registry.POLICY_FIELDS, "updated_by", "updated_at")
    list_select_related = ("updated_by",)
    search_fields = ("tool",)
    readonly_fields = ("updated_by", "updated_at")

    def save_model(self, request: HttpRequest, obj: ToolPolicy, form: Any, change: bool) -> None:
        # The console's path: saved and audited together.
        by: Any = request.user
        services.tool_policy_save(policy=obj, by=by, changes=form.describe_changes())

    def delete_model(self, request: HttpRequest, obj: ToolPolicy) -> None:
        with transaction.atomic():
            _audit_policy_delete(request, obj)
            super().delete_model(request, obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[ToolPolicy]) -> None:
        with transaction.atomic():
            for policy in queryset:
                _audit_policy_delete(request, policy)
            super().delete_queryset(request, queryset)


def _audit_policy_delete(request: HttpRequest, policy: ToolPolicy) -> None:
    audit_record(
        actor=request.user,
        action=Action.POLICY_EDIT,
        obj=policy,
        request=request,
        detail={"deleted": True},
        summary="Deleted the policy: every field back to the catalog's",
    )


@admin.register(AuditEntry)
class AuditEntryAdmin(ReadOnlyAdmin):
    """The audit log, as the console's /console/audit/ shows it: read-only, kept."""

    list_display = ("at", "actor_username", "action", "object_type", "object_id", "summary")
    list_filter = ("action",)
    search_fields = ("actor_username", "object_id")
    date_hierarchy = "at"
