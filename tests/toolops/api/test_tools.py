"""GET /api/v1/tools: the public tools, in ToolOps' shape and in OpenAI's."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import pytest
from rest_framework.test import APIClient

from tests.conftest import DEMO_CATALOG, Shop
from tests.toolops.api.helpers import body, create_run, post_call
from toolops.tools import registry

pytestmark = pytest.mark.django_db

FIELDS = {
    "name",
    "description",
    "kind",
    "params_schema",
    "requires_approval",
    "compensation",
    "query",
    "available",
    "available_at",
}
KINDS = {"read", "idempotent_write", "compensable_write", "irreversible"}
CATALOG = {t["name"]: t for t in tomllib.loads(DEMO_CATALOG.read_text())["tool"]}
PUBLIC = {name for name, t in CATALOG.items() if not t.get("internal")}
INTERNAL = {name for name, t in CATALOG.items() if t.get("internal")}


def tools(client: APIClient, query: str = "") -> list[dict[str, Any]]:
    response = client.get(f"/api/v1/tools{query}")
    assert response.status_code == 200, response.content
    data = body(response)
    assert set(data) == {"tools"}, data
    return data["tools"]


def test_it_lists_the_public_tools(api: APIClient, shop: Shop) -> None:
    listed = {t["name"]: t for t in tools(api)}

    assert set(listed) >= PUBLIC
    assert not INTERNAL & set(listed)
    for name in PUBLIC:
        tool = listed[name]
        declared = CATALOG[name]
        assert set(tool) >= FIELDS, (name, tool)
        assert tool["kind"] == declared["kind"]
        assert tool["kind"] in KINDS
        assert tool["description"] == declared["description"]
        assert tool["params_schema"] == declared["params_schema"]
        approval = declared.get("requires_approval", declared["kind"] == "irreversible")
        assert tool["requires_approval"] is approval, name
        assert tool["available"] is True
        assert tool["available_at"] is None


def test_it_names_compensations_and_queries(api: APIClient, shop: Shop) -> None:
    listed = {t["name"]: t for t in tools(api)}

    assert "release_stock" in json.dumps(listed["reserve_stock"]["compensation"])
    assert listed["reserve_stock"]["query"] is None
    assert "cancel_order" in json.dumps(listed["create_order"]["compensation"])
    assert "query_order" in json.dumps(listed["create_order"]["query"])
    assert "get_charge" in json.dumps(listed["charge"]["query"])
    assert listed["query_stock"]["compensation"] is None
    assert listed["query_stock"]["query"] is None


def test_it_lists_tools_in_openai_format(api: APIClient, shop: Shop) -> None:
    native = {t["name"]: t for t in tools(api)}

    response = api.get("/api/v1/tools?format=openai")

    assert response.status_code == 200, response.content
    data = body(response)
    assert set(data) == {"tools"}
    openai = data["tools"]
    assert {t["function"]["name"] for t in openai} == set(native)
    for tool in openai:
        assert tool["type"] == "function"
        assert set(tool["function"]) >= {"name", "description", "parameters"}
        name = tool["function"]["name"]
        assert tool["function"]["description"] == native[name]["description"]
        assert tool["function"]["parameters"] == native[name]["params_schema"]


def test_it_marks_a_tool_with_an_open_breaker_unavailable(
    api: APIClient, shop: Shop, settings: Any
) -> None:
    catalog = Path(settings.TOOLOPS_TOOLS_FILE)
    with catalog.open("a") as f:
        f.write(f"""
[[tool]]
name = "flaky_stock"
kind = "read"
description = "query_stock behind a hair-trigger breaker."
url = "{shop.url}/inventory/stock"
max_attempts = 1
breaker = {{ consecutive_failures = 1, min_calls = 1, cooldown_s = 60 }}
params_schema = {{ type = "object", properties = {{ sku = {{ type = "string" }} }} }}
""")
    registry.reset()
    shop.fault("/inventory/stock", fail_next=1, fail_status=503)
    create_run(api, "r-1")
    failed = post_call(api, "r-1", step_index=0, tool="flaky_stock", args={"sku": "A12"})
    assert body(failed)["status"] == "failed", failed.content

    listed = {t["name"]: t for t in tools(api)}

    assert listed["flaky_stock"]["available"] is False
    assert listed["flaky_stock"]["available_at"] is not None
    assert listed["query_stock"]["available"] is True
