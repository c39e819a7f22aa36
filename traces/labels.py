"""The `tool` a metric is grouped under: a name from the catalog, or `(unknown)`.

A call row keeps the name its agent asked for, and an agent may ask for a tool that does
not exist. Grouped by that name, every invented tool would become series of its own in
Prometheus (about 17 per name) and a card on the Metrics page: a label set an agent
decides, unbounded. So a name not in the catalog (an unknown tool, or one since removed)
is counted under one fixed value, and the label set is the catalog's names plus one.
`(unknown)` cannot collide with a tool: parentheses are not allowed in a tool name."""

from __future__ import annotations

from django.db.models import Case, CharField, F, Value, When
from django.db.models.expressions import Expression

from toolops.tools import registry
from toolops.tools.catalog import CatalogError

UNKNOWN = "(unknown)"


def catalog_tools() -> list[str]:
    """The catalog's tool names, internal ones too (none when it cannot be loaded: the
    metrics still answer, every call under `(unknown)`)."""
    try:
        return sorted(registry.load())
    except CatalogError:
        return []


def tool_label(tool: str, tools: frozenset[str]) -> str:
    return tool if tool in tools else UNKNOWN


def tool_label_sql(tools: list[str]) -> Expression:
    """The row's `tool` when it names a catalog tool, else `(unknown)`: grouped by, so a
    query returns one row per catalog tool at most, plus one, whatever the rows say."""
    # Never a bare constant, even with no catalog: Django leaves a constant out of the
    # GROUP BY, which would turn the grouped query into one total over the whole table.
    # `(unknown)` as the only name changes nothing: it labels itself either way.
    return Case(
        When(tool__in=tools or [UNKNOWN], then=F("tool")),
        default=Value(UNKNOWN),
        output_field=CharField(),
    )


def in_catalog(tool: str) -> bool:
    """Whether the catalog (loaded once per process, so no query) names `tool`."""
    try:
        return tool in registry.load()
    except CatalogError:
        return False
