"""GET /api/v1/schema/: the OpenAPI 3 schema, served without authentication."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from tests.toolops.api.helpers import body

pytestmark = pytest.mark.django_db

PATHS = {
    "/api/v1/runs": {"post"},
    "/api/v1/runs/{run_id}": {"get"},
    "/api/v1/runs/{run_id}/complete": {"post"},
    "/api/v1/runs/{run_id}/abort": {"post"},
    "/api/v1/runs/{run_id}/calls": {"post"},
    "/api/v1/calls/{call_id}": {"get"},
    "/api/v1/tools": {"get"},
}
CALL_STATUSES = {
    "succeeded",
    "degraded",
    "failed",
    "unknown",
    "skipped",
    "pending_approval",
    "rejected",
    "in_progress",
}
RUN_STATUSES = {
    "running",
    "completed",
    "aborting",
    "aborted",
    "compensation_failed",
    "budget_exhausted",
}
REASONS = {
    "invalid_args",
    "unknown_tool",
    "downstream_error",
    "timeout",
    "circuit_open",
    "budget_exhausted",
    "dependency_failed",
    "result_invalid",
    "rejected",
    "expired",
    "not_permitted",
    "spend_limit",
}


def resolve(schema: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    """Follow $ref, and the allOf/oneOf wrappers that nullable references use."""
    while True:
        if "$ref" in node:
            name = node["$ref"].removeprefix("#/components/schemas/")
            node = schema["components"]["schemas"][name]
        elif "allOf" in node or "oneOf" in node:
            variants = node.get("allOf") or node["oneOf"]
            real = [v for v in variants if v.get("type") != "null" and v.get("enum") != [None]]
            assert len(real) == 1, node
            node = real[0]
        else:
            return node


def enum_of(schema: dict[str, Any], node: dict[str, Any]) -> set[Any]:
    return set(resolve(schema, node)["enum"]) - {None, ""}


def response_schema(schema: dict[str, Any], path: str, method: str) -> dict[str, Any]:
    ok = schema["paths"][path][method]["responses"]["200"]
    return resolve(schema, ok["content"]["application/json"]["schema"])


@pytest.fixture
def schema() -> dict[str, Any]:
    response = APIClient().get("/api/v1/schema/?format=json")
    assert response.status_code == 200, response.content[:300]
    return body(response)


def test_it_serves_json_with_the_format_parameter() -> None:
    response = APIClient().get("/api/v1/schema/?format=json")

    assert response.status_code == 200
    assert "json" in response["Content-Type"]
    assert body(response)["openapi"].startswith("3.")


def test_it_serves_json_when_asked_by_accept() -> None:
    response = APIClient().get("/api/v1/schema/", HTTP_ACCEPT="application/json")

    assert response.status_code == 200
    assert "json" in response["Content-Type"]
    assert body(response)["openapi"].startswith("3.")


def test_it_serves_the_schema_with_a_bad_token() -> None:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Bearer nope")

    response = client.get("/api/v1/schema/?format=json")

    assert response.status_code == 200


def test_it_has_every_api_path(schema: dict[str, Any]) -> None:
    for path, methods in PATHS.items():
        assert path in schema["paths"], path
        assert methods <= set(schema["paths"][path]), (path, set(schema["paths"][path]))


def test_it_has_the_call_statuses(schema: dict[str, Any]) -> None:
    call = response_schema(schema, "/api/v1/calls/{call_id}", "get")

    assert enum_of(schema, call["properties"]["status"]) == CALL_STATUSES
    error = resolve(schema, call["properties"]["error"])
    assert enum_of(schema, error["properties"]["class"]) == {"fatal", "retry", "unknown"}
    assert enum_of(schema, error["properties"]["reason"]) == REASONS
    assert set(call["properties"]) >= {
        "call_id",
        "tool_call_id",
        "run_id",
        "step_index",
        "tool",
        "status",
        "result",
        "error",
        "feedback",
        "attempts",
        "replayed",
        "approval",
        "created_at",
        "finished_at",
    }


def test_it_has_the_run_statuses(schema: dict[str, Any]) -> None:
    run = response_schema(schema, "/api/v1/runs/{run_id}", "get")

    assert enum_of(schema, run["properties"]["status"]) == RUN_STATUSES
    assert set(run["properties"]) >= {
        "run_id",
        "trace_id",
        "session_key",
        "status",
        "budget",
        "usage",
        "last_succeeded_tool_call_id",
        "summary",
        "calls",
        "compensations",
        "created_at",
        "ended_at",
    }


def test_it_describes_the_call_request(schema: dict[str, Any]) -> None:
    operation = schema["paths"]["/api/v1/runs/{run_id}/calls"]["post"]
    request = resolve(schema, operation["requestBody"]["content"]["application/json"]["schema"])

    assert {"step_index", "tool", "args"} <= set(request.get("required", []))
    assert set(request["properties"]) >= {
        "step_index",
        "tool",
        "args",
        "tool_call_id",
        "depends_on",
        "tokens",
        "wait",
    }
    assert request["properties"]["wait"].get("maximum") == 30


def test_it_describes_the_tool_list(schema: dict[str, Any]) -> None:
    listing = response_schema(schema, "/api/v1/tools", "get")
    tool = resolve(schema, listing["properties"]["tools"]["items"])

    assert set(tool["properties"]) >= {
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
    assert enum_of(schema, tool["properties"]["kind"]) == {
        "read",
        "idempotent_write",
        "compensable_write",
        "irreversible",
    }
