"""The tools page (each tool's effective policy, cell by cell against the catalog) and
the policy editor."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.db import IntegrityError
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods

from toolops import services
from toolops.forms import ToolPolicyForm
from toolops.models import ToolPolicy
from toolops.permissions import console_required, require_policy_editor
from toolops.tools import registry
from toolops.tools.catalog import CatalogError
from toolops.tools.spec import ToolSpec
from toolops.views.common import HtmxHttpRequest, get_catalog_tool, page_context

POLICY_COLUMNS = (
    ("timeout_s", "timeout"),
    ("max_attempts", "attempts"),
    ("backoff_base_s", "backoff base"),
    ("backoff_cap_s", "backoff cap"),
    ("requires_approval", "approval"),
    ("approval_ttl_s", "approval TTL"),
    ("approvals_required", "approvers"),
    ("session_dedupe_window_s", "dedupe window"),
)


@dataclass
class PolicyCell:
    name: str
    value: Any
    catalog: Any
    overridden: bool


@dataclass
class ToolRow:
    spec: ToolSpec
    policy: ToolPolicy | None
    cells: list[PolicyCell]


def _overrides(policy: ToolPolicy | None) -> dict[str, Any]:
    if policy is None:
        return {}
    values = {name: getattr(policy, name) for name in registry.POLICY_FIELDS}
    return {k: v for k, v in values.items() if v is not None}


def _tool_rows() -> list[ToolRow]:
    # The policy rows are read here, not through the registry's per-process cache, so
    # the page shows a change the moment it is saved.
    policies = {p.tool: p for p in ToolPolicy.objects.select_related("updated_by")}
    catalog = registry.load()
    # Public tools first (what agents see), then the internal ones (compensations, queries).
    specs = sorted(catalog.values(), key=lambda s: (s.internal, s.name))
    rows = []
    for spec in specs:
        policy = policies.get(spec.name)
        overrides = _overrides(policy)
        effective = spec.with_policy(overrides)
        cells = [
            PolicyCell(name, getattr(effective, name), getattr(spec, name), name in overrides)
            for name, _ in POLICY_COLUMNS
        ]
        rows.append(ToolRow(spec=effective, policy=policy, cells=cells))
    return rows


@require_GET
@console_required
def tool_list(request: HtmxHttpRequest) -> HttpResponse:
    try:
        rows, catalog_error = _tool_rows(), ""
    except CatalogError as exc:
        rows, catalog_error = [], str(exc)
    ctx = page_context(
        request,
        "tools",
        rows=rows,
        columns=[label for _, label in POLICY_COLUMNS],
        catalog_error=catalog_error,
        cache_s=settings.TOOLOPS_POLICY_CACHE_S,
    )
    return render(request, "console/tools.html", ctx)


@require_http_methods(["GET", "POST"])
@console_required
def tool_policy_edit(request: HtmxHttpRequest, name: str) -> HttpResponse:
    require_policy_editor(request.user)
    spec = get_catalog_tool(name)
    policy = ToolPolicy.objects.filter(tool=spec.name).first() or ToolPolicy(tool=spec.name)
    if request.method == "POST":
        form = ToolPolicyForm(request.POST, instance=policy, spec=spec)
        if form.is_valid():
            if not form.has_changed():
                messages.info(request, f"Nothing changed in the policy for {spec.name}.")
                return redirect("console:tools")
            try:
                services.tool_policy_save(
                    policy=form.save(commit=False),
                    by=request.user,
                    changes=form.describe_changes(),
                )
            except IntegrityError:
                # Another operator created this tool's policy between our read and write.
                form.add_error(None, "Someone else just changed this policy; please retry.")
            else:
                messages.success(
                    request,
                    f"Policy for {spec.name} saved. Changes apply within a few seconds "
                    f"(every process re-reads policies every "
                    f"{settings.TOOLOPS_POLICY_CACHE_S:g} s).",
                )
                return redirect("console:tools")
    else:
        form = ToolPolicyForm(instance=policy, spec=spec)
    ctx = page_context(request, "tools", spec=spec, policy=policy, form=form)
    return render(request, "console/tool_policy.html", ctx)
