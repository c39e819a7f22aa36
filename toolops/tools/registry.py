"""One registry for Python tools (registered in code) and HTTP tools (the TOML catalog),
with operators' ToolPolicy overrides applied on top."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from django.conf import settings

from toolops.models import ToolPolicy

from .catalog import CatalogError, cross_check, load_file
from .spec import ToolSpec

_code_tools: dict[str, ToolSpec] = {}
_lock = threading.Lock()
_catalog: dict[str, ToolSpec] | None = None
_policies: tuple[float, dict[str, dict[str, Any]]] = (0.0, {})

POLICY_FIELDS = (
    "timeout_s",
    "max_attempts",
    "backoff_base_s",
    "backoff_cap_s",
    "requires_approval",
    "approval_ttl_s",
    "session_dedupe_window_s",
    "query_before_write",
    "approvals_required",
)


def python_tool(**declaration: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register a Python function as a tool: `@python_tool(name=…, kind=…, params_schema=…)`.
    The function takes the validated args as keyword arguments and returns a JSON value."""

    def register(func: Callable[..., Any]) -> Callable[..., Any]:
        spec = ToolSpec(func=func, **declaration)
        _code_tools[spec.name] = spec
        reset()
        return func

    return register


def load() -> dict[str, ToolSpec]:
    """All tools, loading the catalog once per process. Raises CatalogError."""
    global _catalog
    if _catalog is None:
        with _lock:
            if _catalog is None:
                tools = dict(_code_tools)
                if settings.TOOLOPS_TOOLS_FILE:
                    for spec in load_file(settings.TOOLOPS_TOOLS_FILE):
                        if spec.name in tools:
                            raise CatalogError(spec.name, "name", "is already a Python tool")
                        tools[spec.name] = spec
                errors = [p for p in cross_check(tools) if not p.startswith("warning:")]
                if errors:
                    raise CatalogError("*", "catalog", "; ".join(errors))
                _catalog = tools
    return _catalog


def reset() -> None:
    """Forget the loaded catalog and cached policies (tests, and after settings change)."""
    global _catalog, _policies
    _catalog = None
    _policies = (0.0, {})


def _policy_overrides() -> dict[str, dict[str, Any]]:
    # Policies are read on every call: cache them briefly per process so an operator's
    # change reaches every web and worker process within TOOLOPS_POLICY_CACHE_S.
    global _policies
    loaded_at, cached = _policies
    if time.monotonic() - loaded_at < settings.TOOLOPS_POLICY_CACHE_S:
        return cached
    fresh: dict[str, dict[str, Any]] = {}
    for row in ToolPolicy.objects.values("tool", *POLICY_FIELDS):
        name = row.pop("tool")
        fresh[name] = {k: v for k, v in row.items() if v is not None}
    _policies = (time.monotonic(), fresh)
    return fresh


def get(name: str, *, include_internal: bool = True) -> ToolSpec | None:
    spec = load().get(name)
    if spec is None or (spec.internal and not include_internal):
        return None
    return spec.with_policy(_policy_overrides().get(name, {}))


def public_tools() -> list[ToolSpec]:
    overrides = _policy_overrides()
    return [
        spec.with_policy(overrides.get(spec.name, {}))
        for spec in sorted(load().values(), key=lambda s: s.name)
        if not spec.internal
    ]


def names(*, include_internal: bool = False) -> list[str]:
    return [s.name for s in load().values() if include_internal or not s.internal]
