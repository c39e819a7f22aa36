"""Header injection through the ids that ToolOps sends downstream as headers: the run_id
(`X-Toolops-Run-Id`), the tool_call_id (`X-Toolops-Tool-Call-Id`) and the trace id
(`traceparent`), and the session_key, which is an id of the same rule. An agent that
puts CR/LF or another control character in one, through the API or MCP's `_meta`, must
get a 400 (an MCP error), and the downstream — the demo shop, a real HTTP server that
records every request's headers — must never receive a request with a header it added.

Trailing newlines are a case apart: an id in a JSON body was once trimmed (`"r-1\\n"`
became `r-1`), and in MCP's `_meta` slipped past a `$` that matches before a final
newline (the run was made, and its write failed to send the header). Ids are matched
whole and never trimmed now, in the API and in MCP alike."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from tests.conftest import Shop
from tests.toolops.api.helpers import assert_problem, body, create_run, post_call
from toolops.mcp import calls as mcp_calls
from toolops.models import Agent, Run, ToolCall

pytestmark = pytest.mark.django_db

RESERVE = {"sku": "A12", "qty": 1}
TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
INJECTED = "\r\nX-Injected: 1"
CONTROLS = ["\r\n", "\n", "\r", "\x00", "\t", "\x0b", "\x1b", "\x7f"]


def nothing_injected(shop: Shop) -> None:
    """No request the shop saw carries the injected header or a value with CR/LF."""
    for request in shop.requests():
        headers = {name.lower(): value for name, value in request["headers"].items()}
        assert "x-injected" not in headers
        assert not any("\r" in v or "\n" in v for v in headers.values())


def reserve(api: APIClient, run_id: str = "r-1", **fields: Any) -> Any:
    return post_call(api, run_id, step_index=0, tool="reserve_stock", args=RESERVE, **fields)


# -- the API ------------------------------------------------------------------------------------


@pytest.mark.parametrize("control", CONTROLS)
def test_a_run_id_with_a_control_character_inside_is_refused(
    api: APIClient, shop: Shop, control: str
) -> None:
    response = api.post("/api/v1/runs", {"run_id": f"r-1{control}X-Injected: 1"}, format="json")

    assert_problem(response, 400)
    assert not Run.objects.exists()


@pytest.mark.parametrize("end", ["\n", "\r\n", " "])
def test_a_run_id_ending_in_a_newline_or_space_is_refused_not_trimmed(
    api: APIClient, shop: Shop, end: str
) -> None:
    response = api.post("/api/v1/runs", {"run_id": f"r-1{end}"}, format="json")

    assert_problem(response, 400)
    assert not Run.objects.exists()


def test_a_run_id_with_crlf_in_the_url_path_reaches_no_downstream(
    api: APIClient, shop: Shop
) -> None:
    create_run(api)

    response = reserve(api, "r-1%0D%0AX-Injected:%201")

    assert response.status_code == 404
    assert shop.requests() == [] and not ToolCall.objects.exists()


def test_a_run_id_with_a_final_newline_in_the_url_path_reaches_no_downstream(
    api: APIClient, shop: Shop
) -> None:
    create_run(api)

    response = reserve(api, "r-1%0A")

    # A malformed id in a path is a 404, like a run that is not the agent's.
    assert response.status_code == 404
    assert shop.requests() == [] and not ToolCall.objects.exists()


@pytest.mark.parametrize("control", CONTROLS)
def test_a_tool_call_id_with_a_control_character_inside_is_refused_and_nothing_is_sent(
    api: APIClient, shop: Shop, control: str
) -> None:
    create_run(api)

    response = reserve(api, tool_call_id=f"tc-1{control}X-Injected: 1")

    assert_problem(response, 400)
    assert shop.requests() == [] and not ToolCall.objects.exists()


def test_a_tool_call_id_ending_in_a_newline_is_refused_not_trimmed(
    api: APIClient, shop: Shop
) -> None:
    create_run(api)

    response = reserve(api, tool_call_id="tc-1\n")

    assert_problem(response, 400)
    assert shop.requests() == []


@pytest.mark.parametrize("control", CONTROLS)
def test_a_trace_id_with_a_control_character_is_refused(
    api: APIClient, shop: Shop, control: str
) -> None:
    response = api.post(
        "/api/v1/runs",
        {"run_id": "r-1", "trace_id": TRACE[:16] + control + TRACE[16:]},
        format="json",
    )

    assert_problem(response, 400)
    assert not Run.objects.exists()


def test_a_trace_id_ending_in_a_newline_is_refused_not_trimmed(api: APIClient, shop: Shop) -> None:
    response = api.post("/api/v1/runs", {"run_id": "r-1", "trace_id": TRACE + "\n"}, format="json")

    assert_problem(response, 400)


@pytest.mark.parametrize("control", CONTROLS)
def test_a_session_key_with_a_control_character_is_refused(
    api: APIClient, shop: Shop, control: str
) -> None:
    response = api.post(
        "/api/v1/runs",
        {"run_id": "r-1", "session_key": f"conv{control}X-Injected: 1"},
        format="json",
    )

    assert_problem(response, 400)
    assert not Run.objects.exists()


def test_a_session_key_ending_in_a_newline_is_refused_not_trimmed(
    api: APIClient, shop: Shop
) -> None:
    response = api.post("/api/v1/runs", {"run_id": "r-1", "session_key": "conv\n"}, format="json")

    assert_problem(response, 400)


def test_a_traceparent_request_header_with_crlf_is_not_passed_downstream(
    api: APIClient, shop: Shop
) -> None:
    run = create_run(api, trace_id=TRACE)
    hostile = f"00-{TRACE}-00f067aa0ba902b7-01{INJECTED}"

    done = body(reserve(api, HTTP_TRACEPARENT=hostile))

    assert done["status"] == "succeeded"
    [sent] = shop.requests("/inventory/reservations")
    headers = {name.lower(): value for name, value in sent["headers"].items()}
    # ToolOps builds the traceparent it sends: the run's trace and the attempt's own span.
    assert headers["traceparent"].startswith(f"00-{run['trace_id']}-")
    assert headers["traceparent"] != hostile.strip()
    nothing_injected(shop)


def test_ids_sent_downstream_are_exactly_the_ids_accepted(api: APIClient, shop: Shop) -> None:
    create_run(api, "r-1.a:b_c-d", trace_id=TRACE)

    reserve(api, "r-1.a:b_c-d", tool_call_id="tc-1.a:b")

    [sent] = shop.requests("/inventory/reservations")
    headers = {name.lower(): value for name, value in sent["headers"].items()}
    assert headers["x-toolops-run-id"] == "r-1.a:b_c-d"
    assert headers["x-toolops-tool-call-id"] == "tc-1.a:b"
    nothing_injected(shop)


# -- MCP: a tools/call's `_meta` (the handler behind the MCP server's tools/call) ----------------


def mcp_call(agent: Agent, meta: dict[str, Any]) -> mcp_calls.Outcome:
    return mcp_calls.call(
        agent=agent,
        session_id="s-1",
        tool="reserve_stock",
        arguments=RESERVE,
        meta=meta,
        traceparent="",
    )


@pytest.mark.parametrize("control", CONTROLS)
def test_an_mcp_run_id_with_a_control_character_inside_is_refused(
    agent_a: tuple[Agent, str], shop: Shop, control: str
) -> None:
    with pytest.raises(mcp_calls.BadMeta, match="toolops/run_id"):
        mcp_call(agent_a[0], {"toolops/run_id": f"r-1{control}X-Injected: 1"})

    assert not Run.objects.exists() and shop.requests() == []


def test_an_mcp_run_id_ending_in_a_newline_is_refused(
    agent_a: tuple[Agent, str], shop: Shop
) -> None:
    with pytest.raises(mcp_calls.BadMeta, match="toolops/run_id"):
        mcp_call(agent_a[0], {"toolops/run_id": "r-1\n"})

    assert not Run.objects.exists() and shop.requests() == []


def test_an_mcp_traceparent_with_crlf_starts_no_trace_of_its_own(
    agent_a: tuple[Agent, str], shop: Shop
) -> None:
    outcome = mcp_calls.call(
        agent=agent_a[0],
        session_id="s-1",
        tool="reserve_stock",
        arguments=RESERVE,
        meta={"toolops/run_id": "r-9"},
        traceparent=f"00-{TRACE}-00f067aa0ba902b7-01{INJECTED}",
    )

    assert not outcome.is_error
    nothing_injected(shop)
