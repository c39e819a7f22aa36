"""`manage.py check` validates the tool catalog (TOOLOPS_TOOLS_FILE): a bad file is an
error naming the tool and field, an unsafe write nobody can reconcile a warning."""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from tests.conftest import DEMO_CATALOG
from toolops.tools import registry
from toolops.tools.catalog import CatalogError

PING = """
[[tool]]
name = "ping"
kind = "read"
description = "Ping."
url = "http://127.0.0.1:9/ping"
params_schema = { type = "object" }
"""

UNDO = """
[[tool]]
name = "undo_it"
kind = "idempotent_write"
internal = true
url = "http://127.0.0.1:9/undo"
idempotency_header = true
params_schema = { type = "object" }
"""

Catalog = Callable[[str], Path]


@pytest.fixture
def catalog(tmp_path: Path, settings: Any) -> Iterator[Catalog]:
    def write(text: str) -> Path:
        path = tmp_path / "tools.toml"
        path.write_text(text)
        settings.TOOLOPS_TOOLS_FILE = str(path)
        registry.reset()
        return path

    yield write
    registry.reset()


def check() -> str:
    """Run `manage.py check`; the output (warnings) on success."""
    out, err = io.StringIO(), io.StringIO()
    call_command("check", stdout=out, stderr=err)
    return out.getvalue() + err.getvalue()


def check_error() -> str:
    with pytest.raises(SystemCheckError) as excinfo:
        check()
    return str(excinfo.value)


def tool(name: str, kind: str, extra: str = "") -> str:
    return f"""
[[tool]]
name = "{name}"
kind = "{kind}"
url = "http://127.0.0.1:9/{name}"
params_schema = {{ type = "object" }}
{extra}
"""


def test_it_passes_the_demo_catalog(catalog: Catalog) -> None:
    catalog(DEMO_CATALOG.read_text())

    output = check()

    # The demo's messages are its unsafe writes with neither a query nor a key.
    warned = [line for line in output.splitlines() if "toolops.W001" in line]
    assert sorted(w.split("'")[1] for w in warned) == ["send_notification", "send_voucher"]
    assert "reserve_stock" in registry.names()


def test_it_passes_a_minimal_tool(catalog: Catalog) -> None:
    catalog(PING)

    output = check()

    assert "ping" not in output


def test_it_names_the_tool_and_field_of_a_bad_kind(catalog: Catalog) -> None:
    catalog(tool("ping", "readish"))

    message = check_error()

    assert "ping" in message
    assert "kind" in message


def test_it_requires_a_compensation_on_a_compensable_write(catalog: Catalog) -> None:
    catalog(PING + tool("reserve", "compensable_write", "idempotency_header = true"))

    message = check_error()

    assert "reserve" in message
    assert "compensation" in message


@pytest.mark.parametrize("value", ["0", "3", '"two"'])
def test_it_allows_one_or_two_reviewers_only(catalog: Catalog, value: str) -> None:
    catalog(PING + tool("pay", "irreversible", f"approvals_required = {value}"))

    message = check_error()

    assert "pay" in message
    assert "approvals_required" in message


def test_it_refuses_an_invalid_params_schema(catalog: Catalog) -> None:
    catalog(PING.replace('{ type = "object" }', '{ type = "object", required = "sku" }'))

    message = check_error()

    assert "ping" in message
    assert "params_schema" in message


def test_it_refuses_a_params_schema_of_an_unknown_type(catalog: Catalog) -> None:
    catalog(PING.replace('{ type = "object" }', '{ type = "objekt" }'))

    message = check_error()

    assert "ping" in message
    assert "params_schema" in message


def test_it_refuses_an_unknown_field(catalog: Catalog) -> None:
    catalog(PING + 'colour = "red"\n')

    message = check_error()

    assert "ping" in message
    assert "colour" in message


def test_it_refuses_invalid_toml(catalog: Catalog) -> None:
    path = catalog(PING + "\n[[tool]\nname = \n")

    message = check_error()

    assert path.name in message


def test_it_refuses_a_query_naming_an_unknown_tool(catalog: Catalog) -> None:
    catalog(PING + tool("charge", "irreversible", 'query = "get_chrage"'))

    message = check_error()

    assert "charge" in message
    assert "query" in message
    assert "get_chrage" in message


def test_it_refuses_a_compensation_naming_an_unknown_tool(catalog: Catalog) -> None:
    extra = 'idempotency_header = true\ncompensation = { tool = "nope" }'
    catalog(tool("reserve", "compensable_write", extra))

    message = check_error()

    assert "reserve" in message
    assert "compensation" in message


def test_it_warns_about_an_unsafe_write_nobody_can_reconcile(catalog: Catalog) -> None:
    catalog(
        tool("notify", "irreversible")
        + UNDO
        + tool("book", "compensable_write", 'compensation = { tool = "undo_it" }')
    )

    output = check()

    assert "toolops.W001" in output
    assert "notify" in output
    assert "book" in output
    assert "undo_it" not in output
    assert {"notify", "book"} <= set(registry.names())


def test_it_does_not_warn_about_a_safe_write(catalog: Catalog) -> None:
    catalog(
        UNDO
        + tool("book", "compensable_write", 'idempotency_header = true\ncompensation = "undo_it"')
        + tool("pay", "irreversible", 'query = "ping"')
        + PING
    )

    output = check()

    assert "toolops.W001" not in output


def test_it_refuses_allow_partial_on_a_write(catalog: Catalog) -> None:
    catalog(tool("save", "idempotent_write", "allow_partial = true"))

    message = check_error()

    assert "save" in message
    assert "allow_partial" in message


def test_it_allows_allow_partial_on_a_read(catalog: Catalog) -> None:
    catalog(tool("look", "read", "allow_partial = true"))

    check()


def test_it_refuses_a_bad_tool_name(catalog: Catalog) -> None:
    catalog(tool("bad name", "read"))

    message = check_error()

    assert "name" in message


def test_it_refuses_a_duplicate_tool(catalog: Catalog) -> None:
    catalog(PING + PING)

    message = check_error()

    assert "ping" in message


def test_it_never_half_loads_a_bad_catalog(catalog: Catalog) -> None:
    catalog(PING + tool("broken", "readish"))
    check_error()

    with pytest.raises(CatalogError):
        registry.load()
    registry.reset()
    with pytest.raises(CatalogError):
        registry.get("ping")


def test_it_refuses_a_tool_named_like_toolops_own(catalog: Catalog) -> None:
    catalog(tool("toolops_policy", "read"))

    message = check_error()

    assert "toolops_policy" in message and "ToolOps' own" in message
