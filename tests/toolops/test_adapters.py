"""The OpenAI and Anthropic tool-calling helpers against a real ToolOps server and the
shop: the model's turn, as the SDKs return it (plain dicts here, the same fields), runs
through ToolOps; the same write asked twice is one write; a failing tool answers the
model with the feedback, as an error."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from tests.conftest import Shop
from toolops.adapters.anthropic import anthropic_tools, tool_results_message
from toolops.adapters.openai import (
    openai_tools,
    responses_tools,
    run_function_calls,
    run_tool_calls,
)
from toolops.client import ToolOps

RESERVE = json.dumps({"sku": "A12", "qty": 1})


@pytest.fixture
def client(toolops_server: Any, agent_a: tuple[Any, str], shop: Shop) -> ToolOps:
    return ToolOps(toolops_server().url, agent_a[1])


def chat_tool_call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def test_the_tool_lists_come_in_each_models_shape(client: ToolOps) -> None:
    chat = {t["function"]["name"]: t for t in openai_tools(client)}
    assert chat["reserve_stock"]["type"] == "function"
    assert chat["reserve_stock"]["function"]["parameters"]["required"] == ["sku", "qty"]
    assert {t["name"] for t in responses_tools(client)} == set(chat)
    claude = {t["name"]: t for t in anthropic_tools(client)}
    assert set(claude) == set(chat)
    assert claude["reserve_stock"]["input_schema"]["required"] == ["sku", "qty"]
    assert "release_stock" not in claude  # internal tools are not offered

    response = client.http.get("/tools", params={"format": "gemini"})
    assert response.status_code == 400 and "unknown format 'gemini'" in response.text


def test_a_write_asked_twice_in_a_turn_is_one_write(client: ToolOps, shop: Shop) -> None:
    with client.run() as run:
        messages = run_tool_calls(
            run,
            [chat_tool_call("call_1", "reserve_stock", RESERVE),
             chat_tool_call("call_2", "reserve_stock", RESERVE)],
            step_index=0,
        )  # fmt: skip

    assert [m["tool_call_id"] for m in messages] == ["call_1", "call_2"]
    assert {m["role"] for m in messages} == {"tool"}
    first, second = (json.loads(m["content"]) for m in messages)
    assert first == second and first["reservation_id"]
    assert len(shop.requests("/inventory/reservations")) == 1


def test_a_failing_tool_tells_the_model_its_feedback(client: ToolOps, shop: Shop) -> None:
    shop.fault("/inventory/reservations", fail_next=1, fail_status=409)
    with client.run() as run:
        [message] = run_tool_calls(
            run, [chat_tool_call("call_1", "reserve_stock", RESERVE)], step_index=0
        )
        [item] = run_function_calls(
            run,
            [{"type": "message", "content": []},
             {"type": "function_call", "call_id": "fc_1", "name": "query_stock",
              "arguments": '{"sku": "A12"}'}],
            step_index=1,
        )  # fmt: skip

    feedback = run.get()["calls"][0]["feedback"]
    assert message["content"] == feedback and "reserve_stock" in feedback
    assert item["type"] == "function_call_output" and item["call_id"] == "fc_1"
    assert json.loads(item["output"])["sku"] == "A12"


def test_anthropic_tool_use_gets_tool_results(client: ToolOps, shop: Shop) -> None:
    shop.fault("/inventory/stock", fail_next=5, fail_status=400)
    content = [
        {"type": "text", "text": "Let me reserve it."},
        {"type": "tool_use", "id": "toolu_1", "name": "reserve_stock",
         "input": {"sku": "A12", "qty": 1}},
        {"type": "tool_use", "id": "toolu_2", "name": "reserve_stock",
         "input": {"sku": "A12", "qty": 1}},
        {"type": "tool_use", "id": "toolu_3", "name": "query_stock", "input": {"sku": "A12"}},
    ]  # fmt: skip
    with client.run() as run:
        message = tool_results_message(run, content, step_index=0)

    assert message["role"] == "user"
    ok, again, failed = message["content"]
    assert [b["tool_use_id"] for b in message["content"]] == ["toolu_1", "toolu_2", "toolu_3"]
    assert "is_error" not in ok and ok["content"] == again["content"]
    assert failed["is_error"] is True and "query_stock" in failed["content"]
    assert len(shop.requests("/inventory/reservations")) == 1


def test_the_same_turn_sent_again_is_answered_from_the_record(client: ToolOps, shop: Shop) -> None:
    calls = [chat_tool_call("call_9", "reserve_stock", RESERVE)]
    with client.run() as run:
        first = run_tool_calls(run, calls, step_index=3)
        again = run_tool_calls(run, calls, step_index=3)

    assert first == again
    assert len(shop.requests("/inventory/reservations")) == 1
    assert isinstance(client.http, httpx.Client)
