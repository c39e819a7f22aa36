"""Helpers for the executor behaviour tests: runs and calls through API.md's literal
URLs, extra catalog tools, and the approval switch for create_order and charge."""

from __future__ import annotations

import json
from typing import Any

from rest_framework.test import APIClient

from toolops.models import ToolPolicy

SHOP = "{shop}"  # replaced by the shop's base URL when the catalog is written

CHARGE_SCHEMA = {
    "type": "object",
    "required": ["order_id", "amount"],
    "properties": {
        "order_id": {"type": "string"},
        "amount": {"type": "string", "format": "decimal"},
    },
}
STOCK_SCHEMA = {"type": "object", "required": ["sku"], "properties": {"sku": {"type": "string"}}}


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {toml_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"no TOML for {type(value).__name__}")


def tool_toml(**fields: Any) -> str:
    """One [[tool]] table of the catalog, from keyword arguments."""
    lines = ["", "[[tool]]"] + [f"{k} = {toml_value(v)}" for k, v in fields.items()]
    return "\n".join(lines) + "\n"


def charge_noquery(**fields: Any) -> str:
    """The charge endpoint as an unsafe write with NO query tool: its unknown outcomes
    cannot be reconciled, so they stay unknown (the case a person settles)."""
    declared: dict[str, Any] = {
        "name": "charge_noquery",
        "kind": "irreversible",
        "url": f"{SHOP}/payments/charges",
        "timeout_s": 2.0,
        "max_attempts": 3,
        "requires_approval": False,
        "client_reference": "client_reference",
        "params_schema": CHARGE_SCHEMA,
    }
    return tool_toml(**{**declared, **fields})


def allow_without_approval(*tools: str, **policy: Any) -> None:
    """The approval gate is not what these tests are about: let the tools run at once."""
    for tool in tools:
        ToolPolicy.objects.update_or_create(
            tool=tool, defaults={"requires_approval": False, **policy}
        )


def start_run(api: APIClient, run_id: str = "r-1", **body: Any) -> dict[str, Any]:
    response = api.post("/api/v1/runs", {"run_id": run_id, **body}, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def post_call(api: APIClient, run_id: str = "r-1", **body: Any) -> Any:
    return api.post(f"/api/v1/runs/{run_id}/calls", body, format="json")


def call_ok(api: APIClient, run_id: str = "r-1", **body: Any) -> dict[str, Any]:
    """A call whose outcome is decided (200), as JSON."""
    response = post_call(api, run_id, **body)
    assert response.status_code == 200, response.content
    return response.json()


def get_run(api: APIClient, run_id: str = "r-1") -> dict[str, Any]:
    response = api.get(f"/api/v1/runs/{run_id}")
    assert response.status_code == 200, response.content
    return response.json()
