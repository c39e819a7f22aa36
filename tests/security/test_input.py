"""Input that cannot cost (API.md "Conventions"): each test sends one hostile input as an
agent would, and expects a clear refusal — a 400 problem body, an `invalid_args` call
naming the field, or MCP's invalid params — answered at once, with nothing written."""

# The console's personas are imported as fixtures, so test arguments shadow them.
# ruff: noqa: F811

from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import Any

import httpx
import pytest
from django.http import Http404
from mcp.shared.exceptions import MCPError
from rest_framework.test import APIClient

from tests.conftest import Shop
from tests.console.conftest import (  # noqa: F401 - fixtures shared with the console tests
    fast_password_hashing,
    logged_in,
    reviewer,
)
from tests.toolops.api.helpers import assert_problem
from tests.toolops.test_mcp import mcp_client, server  # noqa: F401 - the MCP server fixture
from toolops import selectors
from toolops.approvals.models import Approval
from toolops.forms import SettleUnknownForm
from toolops.models import Run, ToolCall

pytestmark = pytest.mark.django_db
ORDER = {"sku": "A12", "qty": 1, "amount": "199.00"}


@pytest.fixture
def run(api: APIClient, shop: Shop) -> str:
    response = api.post("/api/v1/runs", {"run_id": "r-1"}, format="json")
    assert response.status_code == 201, response.content
    return "r-1"


def post_raw(api: APIClient, path: str, raw: str) -> Any:
    return api.generic("POST", path, raw.encode(), content_type="application/json")


def call(api: APIClient, tool: str, args: Any, step_index: int = 0) -> Any:
    body = {"step_index": step_index, "tool": tool, "args": args}
    return api.post("/api/v1/runs/r-1/calls", body, format="json")


def invalid_args(response: Any, field: str) -> str:
    assert response.status_code == 200, response.content
    data = response.json()
    assert (data["status"], data["error"]["reason"]) == ("failed", "invalid_args"), data
    assert repr(field) in data["feedback"], data["feedback"]
    return data["feedback"]


def nested(depth: int, leaf: str = "1") -> str:
    return "[" * depth + leaf + "]" * depth


# -- numbers written as strings, checked before any conversion ---------------------------


def test_it_refuses_a_decimal_string_with_a_huge_exponent(api: APIClient, run: str) -> None:
    feedback = invalid_args(
        call(api, "quote_total", {"unit_price": "1e1000000", "qty": 1}), "unit_price"
    )
    assert "1e308" in feedback


def test_it_refuses_a_decimal_string_with_an_exponent_near_ten_million(
    api: APIClient, run: str
) -> None:
    # create_order's amount has no places: normalising it overflowed (a 500).
    invalid_args(call(api, "create_order", {**ORDER, "amount": "1e9999999"}), "amount")
    assert not Approval.objects.exists()


def test_it_refuses_an_integer_string_with_a_huge_exponent(api: APIClient, run: str) -> None:
    # int() of it took seconds (1e1000000: a minute) with the GIL held, then a 500.
    invalid_args(call(api, "quote_total", {"unit_price": "1.00", "qty": "1e100000"}), "qty")


def test_it_refuses_a_number_past_1e308_written_as_an_integer_literal(
    api: APIClient, run: str
) -> None:
    invalid_args(call(api, "quote_total", {"unit_price": "1.00", "qty": 10**400}), "qty")


def test_it_names_the_field_of_a_number_deep_in_the_args(api: APIClient, run: str) -> None:
    args = {**ORDER, "lines": [{"qty": 1}, {"qty": "1e-5000"}]}
    schema_free = call(api, "create_order", args)  # an extra field: no schema, a string
    assert schema_free.json()["status"] == "pending_approval"  # a string is only a string
    past = call(api, "create_order", {**ORDER, "lines": [{"n": 1}, {"n": 10**309}]}, 1)
    invalid_args(past, "lines.1.n")


# -- JSON past the bounds: a 400 at parse time -------------------------------------------


def test_it_refuses_a_number_literal_that_does_not_fit_a_double(api: APIClient) -> None:
    problem = assert_problem(post_raw(api, "/api/v1/runs", '{"run_id": "r-1", "x": 1e999}'), 400)
    assert "1e999" in problem["detail"]
    assert not Run.objects.exists()


def test_it_refuses_nan_in_a_body(api: APIClient) -> None:
    problem = assert_problem(post_raw(api, "/api/v1/runs", '{"run_id": "r-1", "x": NaN}'), 400)
    assert "NaN" in problem["detail"]


def test_it_refuses_an_integer_literal_past_4300_digits(api: APIClient) -> None:
    raw = '{"run_id": "r-1", "metadata": {"n": ' + "9" * 4301 + "}}"
    problem = assert_problem(post_raw(api, "/api/v1/runs", raw), 400)
    assert "4,300 digits" in problem["detail"]
    assert not Run.objects.exists()


def test_it_refuses_arrays_nested_65_deep(api: APIClient) -> None:
    deep = '{"run_id": "r-1", "metadata": {"x": ' + nested(63) + "}}"  # 65 with the body's
    problem = assert_problem(post_raw(api, "/api/v1/runs", deep), 400)
    assert "deeper than 64" in problem["detail"]
    ok = '{"run_id": "r-1", "metadata": {"x": ' + nested(62) + "}}"
    assert post_raw(api, "/api/v1/runs", ok).status_code == 201


def test_it_refuses_json_nested_5000_deep(api: APIClient) -> None:
    # A RecursionError in the parser (a 500) before.
    problem = assert_problem(post_raw(api, "/api/v1/runs", nested(5000)), 400)
    assert "deeper than 64" in problem["detail"]
    objects = '{"a":' * 5000 + "1" + "}" * 5000
    assert_problem(post_raw(api, "/api/v1/runs", objects), 400)


def test_it_refuses_args_a_few_hundred_deep_before_they_reach_the_approval_page(
    api: APIClient, run: str, reviewer: Any
) -> None:
    # Accepted and held before: then the approval page answered 500, so nobody could
    # review the charge.
    deep = {**ORDER, "note": json.loads(nested(300))}
    assert_problem(call(api, "create_order", deep), 400)
    assert not ToolCall.objects.exists() and not Approval.objects.exists()
    # As deep as the bounds allow is held and reviewable.
    deepest = {**ORDER, "note": json.loads(nested(62))}
    assert call(api, "create_order", deepest).json()["status"] == "pending_approval"
    approval = Approval.objects.get()
    page = logged_in(reviewer).get(f"/console/approvals/{approval.approval_id}/")
    assert page.status_code == 200


def test_it_refuses_args_sent_as_a_string_nested_too_deep(api: APIClient, run: str) -> None:
    for text in ('{"sku": ' + nested(70) + "}", '{"sku": ' + nested(5000) + "}"):
        problem = assert_problem(call(api, "create_order", text), 400)
        assert "deeper than 64" in problem["detail"]
    assert not ToolCall.objects.exists()


def test_it_refuses_a_deep_result_pasted_into_the_console() -> None:
    form = SettleUnknownForm(
        data={"outcome": "took_effect", "note": "checked", "result": nested(5000)}
    )
    assert not form.is_valid()
    assert "deeper than 64" in str(form.errors["result"])


# -- ids, never trimmed -------------------------------------------------------------------


def test_it_refuses_a_nul_in_args_before_a_read_tool_runs(
    api: APIClient, run: str, shop: Shop
) -> None:
    # PostgreSQL cannot store U+0000: the call's insert failed as a 500 after the read
    # tool had already been called.
    raw = r'{"step_index": 0, "tool": "query_stock", "args": {"sku": "A12\u0000"}}'
    problem = assert_problem(post_raw(api, "/api/v1/runs/r-1/calls", raw), 400)
    assert "U+0000" in problem["detail"] and "args.sku" in problem["detail"]
    assert shop.requests() == [] and not ToolCall.objects.exists()


def test_it_refuses_a_nul_in_run_metadata_and_makes_no_run(api: APIClient) -> None:
    raw = r'{"run_id": "r-9", "metadata": {"note\u0000": "x"}}'
    problem = assert_problem(post_raw(api, "/api/v1/runs", raw), 400)
    assert "U+0000" in problem["detail"]
    assert not Run.objects.exists()


@pytest.mark.parametrize("run_id", ["run-1\n", "run-1 ", " run-1", "run-1\r\n"])
def test_it_refuses_an_id_with_white_space_instead_of_trimming_it(
    api: APIClient, run_id: str
) -> None:
    response = api.post("/api/v1/runs", {"run_id": run_id}, format="json")
    assert_problem(response, 400)
    assert not Run.objects.exists()


def test_it_refuses_a_tool_call_id_with_a_trailing_newline(api: APIClient, run: str) -> None:
    body = {
        "step_index": 0,
        "tool": "query_stock",
        "args": {"sku": "A12"},
        "tool_call_id": "tc-1\n",
    }
    assert_problem(api.post("/api/v1/runs/r-1/calls", body, format="json"), 400)
    assert not ToolCall.objects.exists()


def test_it_does_not_take_a_path_id_with_a_trailing_newline_for_another(
    api: APIClient, run: str
) -> None:
    # "$" matched before a trailing newline: "r-1\n" passed as a well-formed id.
    with pytest.raises(Http404):
        selectors.check_id("r-1\n", "run")
    assert api.get("/api/v1/runs/r-1%0A").status_code == 404
    assert api.get("/api/v1/runs/r-1").status_code == 200


# -- MCP ----------------------------------------------------------------------------------


def mcp_call(url: str, token: str, tool: str, arguments: Any, meta: Any = None) -> Any:
    """The SDK client's tools/call; an MCPError is raised out of the client's task group."""

    async def scenario() -> Any:
        async with mcp_client(url, token) as client:
            try:
                return await client.call_tool(tool, arguments, meta=meta)
            except MCPError as exc:
                return exc

    answer = asyncio.run(scenario())
    if isinstance(answer, MCPError):
        raise answer
    return answer


def mcp_raw(url: str, token: str, arguments: str) -> dict[str, Any]:
    """A tools/call whose arguments are sent as written (after the handshake): the
    JSON-RPC error it gets."""
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
    }
    with httpx.Client(base_url=url, headers=headers, timeout=30) as http:
        hello = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        }
        started = http.post("/mcp/", json=hello)
        session = {
            "mcp-session-id": started.headers["mcp-session-id"],
            "mcp-protocol-version": "2025-06-18",
        }
        http.post(
            "/mcp/", json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session
        )
        head = '{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": '
        raw = head + '{"name": "reserve_stock", "arguments": ' + arguments + "}}"
        answer = http.post("/mcp/", content=raw, headers=session)
    text = answer.text
    if answer.headers.get("content-type", "").startswith("text/event-stream"):
        text = next(line[5:] for line in text.splitlines() if line.startswith("data:"))
    return json.loads(text)["error"]


def test_it_refuses_an_mcp_meta_run_id_with_a_newline(
    server: Any, agent_a: tuple[Any, str], shop: Shop
) -> None:
    # It made the run "run-1\n" before, and its write stayed in_progress with a live
    # claim when the id could not go out as a header.
    with pytest.raises(MCPError, match="toolops/run_id"):
        mcp_call(
            server.url,
            agent_a[1],
            "reserve_stock",
            {"sku": "A12", "qty": 1},
            {"toolops/run_id": "run-1\n"},
        )
    assert not Run.objects.exists() and not ToolCall.objects.exists()
    assert shop.requests() == []


@pytest.mark.parametrize("tool", ["reserve_stock\n", "reserve stock", "x" * 65, "café"])
def test_it_refuses_an_mcp_tool_name_outside_the_rule(
    server: Any, agent_a: tuple[Any, str], shop: Shop, tool: str
) -> None:
    with pytest.raises(MCPError, match="tool name"):
        mcp_call(server.url, agent_a[1], tool, {"sku": "A12", "qty": 1})
    assert not ToolCall.objects.exists()


def test_it_refuses_mcp_arguments_nested_too_deep_or_not_finite(
    server: Any, agent_a: tuple[Any, str], shop: Shop
) -> None:
    deep = {"sku": json.loads(nested(80))}
    with pytest.raises(MCPError, match="deeper than 64"):
        mcp_call(server.url, agent_a[1], "reserve_stock", deep)
    # The SDK's client writes NaN as null: sent as text, as a hostile client would.
    for number in ("NaN", "Infinity", "-Infinity"):
        error = mcp_raw(server.url, agent_a[1], f'{{"sku": "A12", "qty": {number}}}')
        assert error["code"] == -32602 and "finite" in error["message"], error
    with pytest.raises(MCPError, match="_meta"):
        mcp_call(
            server.url,
            agent_a[1],
            "reserve_stock",
            {"sku": "A12", "qty": 1},
            {"x": json.loads(nested(80))},
        )
    error = mcp_raw(server.url, agent_a[1], r'{"sku": "A12\u0000", "qty": 1}')
    assert error["code"] == -32602 and "U+0000" in error["message"], error
    assert not ToolCall.objects.exists()


# -- nobody else slows down ---------------------------------------------------------------

HOSTILE = [
    {"step_index": 0, "tool": "quote_total", "args": {"unit_price": "1.00", "qty": "1e1000000"}},
    {"step_index": 1, "tool": "create_order", "args": {**ORDER, "amount": "1e9999999"}},
]
HOSTILE_RAW = [
    nested(5000),
    '{"step_index": 2, "tool": "quote_total", "args": {"qty": 1e999}}',
    '{"step_index": 3, "tool": "quote_total", "args": {"qty": ' + "9" * 4301 + "}}",
]


def test_another_agent_is_answered_while_hostile_input_is_sent(
    toolops_server: Any, agent_a: tuple[Any, str], agent_b: tuple[Any, str], shop: Shop
) -> None:
    live = toolops_server()
    hostile = httpx.Client(
        base_url=live.url, timeout=120, headers={"Authorization": f"Bearer {agent_a[1]}"}
    )
    assert hostile.post("/api/v1/runs", json={"run_id": "r-1"}).status_code == 201
    sending, stop = threading.Event(), threading.Event()
    statuses: list[int] = []

    def attack() -> None:
        while not stop.is_set():
            for body in HOSTILE:
                sending.set()
                statuses.append(hostile.post("/api/v1/runs/r-1/calls", json=body).status_code)
            for raw in HOSTILE_RAW:
                headers = {"Content-Type": "application/json"}
                response = hostile.post("/api/v1/runs/r-1/calls", content=raw, headers=headers)
                statuses.append(response.status_code)

    attacker = threading.Thread(target=attack, daemon=True)
    attacker.start()
    try:
        assert sending.wait(10)
        with httpx.Client(
            base_url=live.url, timeout=30, headers={"Authorization": f"Bearer {agent_b[1]}"}
        ) as other:
            for _ in range(10):
                started = time.monotonic()
                response = other.get("/api/v1/tools")
                elapsed = time.monotonic() - started
                assert response.status_code == 200
                assert elapsed < 5, f"another agent waited {elapsed:.1f} s during the attack"
    finally:
        stop.set()
        attacker.join(60)
        hostile.close()
    # 429: the attacker in debt for the work its bodies cost (toolops/api/work.py).
    assert statuses and set(statuses) <= {200, 400, 429}, statuses
