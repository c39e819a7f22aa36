"""The MCP server at /mcp/, driven by the `mcp` SDK's own client over streamable HTTP
against a real ToolOps server and the shop: the catalog's public tools are listed; a
call is an executor call in the session's run (or the run `_meta` names); a write sent
again is answered from its record, one request downstream; a failing tool is `isError`
with its feedback; a wrong token is refused; a session's run completes when it closes."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any
from unittest.mock import patch

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from tests.conftest import Shop
from tests.console.conftest import make_user
from tests.waiting import wait_until
from tests.worker import Worker, wait_for
from toolops.accounts.tokens import agent_revoke
from toolops.approvals.services import approval_decide
from toolops.models import Approval, Run, ToolCall

RESERVE = {"sku": "A12", "qty": 1}
ORDER = {"sku": "A12", "qty": 1, "amount": "9.50"}


@pytest.fixture
def server(toolops_server: Any) -> Any:
    return toolops_server(TOOLOPS_MCP_WAIT_S="1")


@asynccontextmanager
async def mcp_client(
    url: str, token: str, statuses: list[int] | None = None
) -> AsyncIterator[Client]:
    """The SDK's client with the agent's token; `client.seen_session_ids` records the
    sessions the server gave it, `statuses` the HTTP statuses it answered."""
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)
    seen: list[str] = []

    async def note(response: httpx2.Response) -> None:
        if statuses is not None:
            statuses.append(response.status_code)
        sid = response.headers.get("mcp-session-id")
        if sid and sid not in seen:
            seen.append(sid)

    http.event_hooks["response"].append(note)
    async with http, Client(streamable_http_client(f"{url}/mcp/", http_client=http)) as client:
        client.seen_session_ids = seen  # type: ignore[attr-defined]
        yield client


def run_async(coro: Any) -> Any:
    return asyncio.run(coro)


def text(result: Any) -> str:
    [content] = result.content
    return content.text


def test_the_public_catalog_is_listed_with_its_schemas(
    server: Any, agent_a: tuple[Any, str], shop: Shop
) -> None:
    async def scenario() -> Any:
        async with mcp_client(server.url, agent_a[1]) as client:
            return (await client.list_tools()).tools, client.protocol_version

    tools, version = run_async(scenario())
    by_name = {t.name: t for t in tools}
    assert by_name["reserve_stock"].input_schema["required"] == ["sku", "qty"]
    assert by_name["query_stock"].annotations.read_only_hint is True
    assert "charge" in by_name
    assert not {"release_stock", "cancel_order", "refund", "get_charge"} & set(by_name)
    # The session era: a call without a run id is scoped to the session.
    assert version.startswith("2025")


def test_a_call_runs_in_the_sessions_run_and_a_resend_is_the_same_call(
    server: Any, agent_a: tuple[Any, str], shop: Shop
) -> None:
    async def scenario() -> tuple[Any, Any, Any]:
        async with mcp_client(server.url, agent_a[1]) as client:
            first = await client.call_tool("reserve_stock", RESERVE)
            again = await client.call_tool("reserve_stock", RESERVE)  # a retry, no ids
            stock = await client.call_tool("query_stock", {"sku": "A12"})
            return first, again, stock

    first, again, stock = run_async(scenario())
    assert not first.is_error and first.structured_content["reservation_id"]
    assert json.loads(text(first)) == first.structured_content
    assert again.structured_content == first.structured_content and not again.is_error
    assert stock.structured_content["sku"] == "A12"
    assert len(shop.requests("/inventory/reservations")) == 1

    [run] = Run.objects.filter(agent=agent_a[0])
    assert run.run_id.startswith("mcp-") and run.metadata == {"source": "mcp"}
    assert sorted(run.calls.values_list("tool", "step_index")) == [
        ("query_stock", 0),
        ("reserve_stock", 0),
    ]
    # The client closed its session: the run is complete, its undos discarded.
    wait_until(lambda: Run.objects.get(pk=run.pk).status == "completed")


def test_meta_names_the_run_and_step_and_continues_the_agents_trace(
    server: Any, agent_a: tuple[Any, str], shop: Shop
) -> None:
    trace_id = "4bf92f3577b34da6a3ce929d0e0e4736"
    meta = {
        "toolops/run_id": "conv-7",
        "toolops/step_index": 3,
        "traceparent": f"00-{trace_id}-00f067aa0ba902b7-01",
    }

    async def scenario() -> tuple[Any, Any, Any]:
        async with mcp_client(server.url, agent_a[1]) as client:
            one = await client.call_tool("reserve_stock", RESERVE, meta=meta)
            other_step = await client.call_tool(
                "reserve_stock", RESERVE, meta={**meta, "toolops/step_index": 4}
            )
            with pytest.raises(MCPError, match="toolops/step_index"):
                await client.call_tool(
                    "reserve_stock", RESERVE, meta={**meta, "toolops/step_index": "four"}
                )
            with pytest.raises(MCPError, match="toolops/run_id"):
                await client.call_tool(
                    "reserve_stock", RESERVE, meta={"toolops/run_id": "no spaces"}
                )
            return one, other_step, await client.call_tool("query_stock", {"sku": "A12"})

    one, other_step, unnamed = run_async(scenario())
    assert not one.is_error and not other_step.is_error and not unnamed.is_error
    run = Run.objects.get(agent=agent_a[0], run_id="conv-7")
    assert run.trace_id == trace_id
    assert sorted(run.calls.values_list("step_index", flat=True)) == [3, 4]
    assert run.calls.get(step_index=3).parent_span_id == "00f067aa0ba902b7"
    # Two steps are two writes; the bad _meta made none; the session's own run has the read.
    assert len(shop.requests("/inventory/reservations")) == 2
    assert Run.objects.filter(agent=agent_a[0], run_id__startswith="mcp-").count() == 1


def test_a_failing_tool_is_an_error_with_its_feedback(
    server: Any, agent_a: tuple[Any, str], shop: Shop
) -> None:
    shop.fault("/inventory/reservations", fail_next=1, fail_status=409)

    async def scenario() -> tuple[Any, Any]:
        async with mcp_client(server.url, agent_a[1]) as client:
            failed = await client.call_tool("reserve_stock", RESERVE)
            unknown = await client.call_tool("reserve_stok", RESERVE)
            return failed, unknown

    failed, unknown = run_async(scenario())
    call = ToolCall.objects.get(tool="reserve_stock")
    assert failed.is_error and failed.structured_content is None
    assert call.status == "failed" and text(failed) == call.feedback
    assert "reserve_stock" in text(failed)
    assert unknown.is_error and "reserve_stok" in text(unknown)


def test_a_call_waiting_for_a_reviewer_says_so_and_the_same_call_later_has_the_outcome(
    server: Any,
    agent_a: tuple[Any, str],
    shop: Shop,
    django_user_model: Any,
    worker: Callable[..., Worker],
) -> None:
    meta = {"toolops/run_id": "conv-9"}
    charge = {"order_id": "ord-1", "amount": "9.50"}

    async def ask() -> Any:
        async with mcp_client(server.url, agent_a[1]) as client:
            return await client.call_tool("charge", charge, meta=meta)

    waiting = run_async(ask())
    assert waiting.is_error and "waits for a reviewer" in text(waiting)
    assert "same arguments" in text(waiting) and shop.requests("/payments/charges") == []

    approval = Approval.objects.get()
    rita = make_user(django_user_model, "rita", "reviewers")
    with patch("toolops.tasks.execute_approved_call.delay", autospec=True):
        approval_decide(
            approval=approval, by=rita, approve=True, note="", args_hash=approval.args_hash
        )
    w = worker(TOOLOPS_APPROVAL_SWEEP_S="0.5", TOOLOPS_APPROVAL_GRACE_S="1")
    wait_for(lambda: ToolCall.objects.get(tool="charge").status == "succeeded", 20, w)

    done = run_async(ask())
    assert not done.is_error and done.structured_content["charge_id"]
    assert len(shop.requests("/payments/charges")) == 1
    assert ToolCall.objects.filter(tool="charge").count() == 1


def test_a_call_waiting_for_a_reviewer_ends_when_its_token_is_revoked_meanwhile(
    toolops_server: Any, agent_a: tuple[Any, str], shop: Shop
) -> None:
    # The wait outlives the token check of its request by up to TOOLOPS_MCP_WAIT_S; it
    # used to answer "waits for a reviewer" at its end, after the token was revoked.
    live = toolops_server(TOOLOPS_MCP_WAIT_S="30")
    answers: list[Any] = []

    async def ask() -> Any:
        async with mcp_client(live.url, agent_a[1]) as client:
            try:
                return await client.call_tool("charge", {"order_id": "o-1", "amount": "5.00"})
            except MCPError as exc:
                return exc

    asking = threading.Thread(target=lambda: answers.append(run_async(ask())))
    asking.start()
    wait_until(Approval.objects.exists, 30, failure="the charge was never held")
    agent_revoke(agent=agent_a[0])
    asking.join(45)

    [answer] = answers
    assert isinstance(answer, MCPError), answer
    assert "revoked or replaced" in str(answer)
    assert shop.requests("/payments/charges") == []


def test_a_wrong_token_is_refused_and_a_session_answers_only_its_agent(
    server: Any, agent_a: tuple[Any, str], agent_b: tuple[Any, str], shop: Shop
) -> None:
    statuses: list[int] = []

    async def wrong() -> None:
        async with mcp_client(server.url, "not-a-token", statuses) as client:
            await client.list_tools()

    with pytest.raises(BaseException, match="TaskGroup|rror"):  # the SDK's own wrapping
        run_async(wrong())
    assert statuses and set(statuses) == {401}

    bare = httpx.post(f"{server.url}/mcp/", json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert bare.status_code == 401 and bare.headers["www-authenticate"] == "Bearer"
    assert "Bearer <agent token>" in bare.json()["detail"]

    async def hijack() -> int:
        async with mcp_client(server.url, agent_a[1]) as client:
            await client.list_tools()
            [sid] = client.seen_session_ids  # type: ignore[attr-defined]
            async with httpx2.AsyncClient() as other:
                response = await other.post(
                    f"{server.url}/mcp/",
                    headers={
                        "Authorization": f"Bearer {agent_b[1]}",
                        "mcp-session-id": sid,
                        "mcp-protocol-version": client.protocol_version,
                        "accept": "application/json, text/event-stream",
                    },
                    json={"jsonrpc": "2.0", "id": 7, "method": "tools/list"},
                )
            return response.status_code

    assert run_async(hijack()) == 404
    assert shop.requests() == []


def test_the_sessionless_era_and_a_foreign_host_get_clear_refusals(
    server: Any, agent_a: tuple[Any, str], shop: Shop
) -> None:
    auth = {"Authorization": f"Bearer {agent_a[1]}", "accept": "application/json"}
    probe = httpx.post(
        f"{server.url}/mcp/",
        headers={**auth, "mcp-protocol-version": "2026-07-28"},
        json={"jsonrpc": "2.0", "id": 5, "method": "server/discover"},
    )
    assert probe.status_code == 400
    error = probe.json()
    assert error["id"] == 5 and error["error"]["code"] == -32022
    assert "2025-11-25" in error["error"]["data"]["supported"]

    foreign = httpx.post(
        f"{server.url}/mcp/",
        headers={**auth, "host": "evil.example"},
        json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
    )
    assert foreign.status_code == 400 and "Host" in foreign.json()["detail"]
    elsewhere = httpx.get(f"{server.url}/mcp/other", headers=auth)
    assert elsewhere.status_code == 404


@pytest.mark.parametrize(
    ("tool", "arguments", "meta", "words"),
    [
        ("reserve stock", {}, {}, "tool name"),
        ("reserve_stock\n", {}, {}, "tool name"),
        ("x" * 65, {}, {}, "tool name"),
        ("reserve_stock", {"a": json.loads("[" * 65 + "]" * 65)}, {}, "deeper"),
        ("reserve_stock", {"qty": float("nan")}, {}, "finite"),
        ("reserve_stock", {}, {"x": float("inf")}, "_meta"),
        ("reserve_stock", {}, {"toolops/run_id": "r-1\n"}, "toolops/run_id"),
        ("reserve_stock", {}, {"toolops/run_id": "r-1 "}, "toolops/run_id"),
    ],
)
def test_params_past_the_rules_are_refused_before_anything_is_written(
    tool: str, arguments: dict[str, Any], meta: dict[str, Any], words: str
) -> None:
    from toolops.mcp import calls

    with pytest.raises(calls.BadMeta, match=words):
        calls.call(
            agent=None, session_id="s-1", tool=tool, arguments=arguments, meta=meta, traceparent=""
        )  # type: ignore[arg-type]
