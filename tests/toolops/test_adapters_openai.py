"""The OpenAI helpers in the agent loop of docs/agents.md, against a live ToolOps server and
the shop: the real `openai.OpenAI` client talks to an offline model at its network edge,
and the helpers take the SDK's own objects. The same order asked twice in a turn is one
order; a failing tool tells the model its feedback; a charge waits for a reviewer, and the
same turn sent again after the worker ran it tells the model the charge's result."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import openai
import pytest

from tests.conftest import Shop
from tests.console.conftest import make_user
from tests.toolops.adapters_helpers import CHARGE, FAST, ORDER, FakeModel, approve, carried_out
from tests.worker import Worker
from toolops.adapters.openai import (
    openai_tools,
    responses_tools,
    run_function_calls,
    run_tool_calls,
)
from toolops.client import InvalidId, Run, ToolOps
from toolops.models import ToolPolicy

MODEL = "gpt-test"
CHAT = "/v1/chat/completions"
RESPONSES = "/v1/responses"


@pytest.fixture
def client(toolops_server: Any, agent_a: tuple[Any, str], shop: Shop) -> ToolOps:
    return ToolOps(toolops_server().url, agent_a[1])


def openai_llm(model: FakeModel) -> openai.OpenAI:
    return openai.OpenAI(api_key="test", http_client=model.http_client(), max_retries=0)


def completion(*calls: tuple[str, str, dict[str, Any]], text: str | None = None) -> Any:
    """A Chat Completions answer: `calls` as (id, tool, args) tool calls, or `text`."""
    message: dict[str, Any] = {"role": "assistant", "content": text, "refusal": None}
    if calls:
        message["tool_calls"] = [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)},
            }
            for call_id, name, args in calls
        ]
    finish = "tool_calls" if calls else "stop"
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": MODEL,
        "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


def response(*calls: tuple[str, str, dict[str, Any]], text: str | None = None) -> Any:
    """A Responses API answer: `text` as a message item, then `calls` as function calls."""
    output: list[dict[str, Any]] = []
    if text:
        output.append(
            {
                "type": "message",
                "id": "msg_1",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }
        )
    output += [
        {
            "type": "function_call",
            "id": f"fc_{call_id}",
            "call_id": call_id,
            "name": name,
            "arguments": json.dumps(args),
            "status": "completed",
        }
        for call_id, name, args in calls
    ]
    return {
        "id": "resp_1",
        "object": "response",
        "created_at": 0,
        "model": MODEL,
        "status": "completed",
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
    }


def chat_agent(llm: openai.OpenAI, run: Run, tools: list[Any], prompt: str) -> list[Any]:
    """The Chat Completions loop of docs/agents.md; the conversation it ends with."""
    messages: list[Any] = [{"role": "user", "content": prompt}]
    for turn in range(10):
        answer = llm.chat.completions.create(model=MODEL, messages=messages, tools=tools)
        message = answer.choices[0].message
        messages.append(message)
        if not message.tool_calls:
            break
        messages += run_tool_calls(run, message.tool_calls, step_index=turn)
    return messages


def test_the_tool_lists_come_in_openais_shapes(client: ToolOps) -> None:
    chat = {t["function"]["name"]: t for t in openai_tools(client)}
    assert chat["reserve_stock"]["type"] == "function"
    assert chat["reserve_stock"]["function"]["parameters"]["required"] == ["sku", "qty"]
    assert "release_stock" not in chat  # internal tools are not offered
    responses = {t["name"]: t for t in responses_tools(client)}
    assert set(responses) == set(chat)
    assert responses["reserve_stock"]["type"] == "function"
    assert (
        responses["reserve_stock"]["parameters"] == chat["reserve_stock"]["function"]["parameters"]
    )

    answer = client.http.get("/tools", params={"format": "gemini"})
    assert answer.status_code == 400 and "unknown format 'gemini'" in answer.text


def test_chat_an_order_asked_twice_in_a_turn_is_one_order(client: ToolOps, shop: Shop) -> None:
    ToolPolicy.objects.create(tool="create_order", requires_approval=False)
    model = FakeModel(
        CHAT,
        [
            completion(("call_1", "create_order", ORDER), ("call_2", "create_order", ORDER)),
            completion(text="Your order is placed."),
        ],
    )
    tools = openai_tools(client)

    with client.run() as run:
        messages = chat_agent(openai_llm(model), run, tools, "Order one A12 for 9.50.")

    assert len(shop.requests("/orders")) == 1
    assert messages[-1].content == "Your order is placed."
    first, second = model.sent
    assert first["tools"] == tools
    # The next turn: the assistant's message as the SDK sent it back, then one tool
    # message per tool call, both with the one order.
    assistant, *answers = second["messages"][1:]
    assert [c["id"] for c in assistant["tool_calls"]] == ["call_1", "call_2"]
    assert [(m["role"], m["tool_call_id"]) for m in answers] == [
        ("tool", "call_1"),
        ("tool", "call_2"),
    ]
    assert answers[0]["content"] == answers[1]["content"]
    order = json.loads(answers[0]["content"])
    assert order["order_id"] == shop.state()["orders"][0]["order_id"]


def test_a_stored_turn_sent_again_is_answered_from_the_record(client: ToolOps, shop: Shop) -> None:
    # An agent that resumes a stored conversation has its tool calls as JSON, not as SDK
    # objects; the turn it sends again must not write again. A custom tool call is not a
    # catalog tool: the agent answers it itself.
    turn = [
        {
            "id": "call_9",
            "type": "function",
            "function": {"name": "reserve_stock", "arguments": '{"sku": "A12", "qty": 1}'},
        },
        {"id": "call_x", "type": "custom", "custom": {"name": "notes", "input": "A12 asked"}},
    ]
    with client.run() as run:
        first = run_tool_calls(run, turn, step_index=3)
        again = run_tool_calls(run, turn, step_index=3)

    assert [m["tool_call_id"] for m in first] == ["call_9"]
    assert first == again
    assert json.loads(first[0]["content"])["reservation_id"]
    assert len(run.get()["calls"]) == 1
    assert len(shop.requests("/inventory/reservations")) == 1


def test_responses_a_failing_tool_tells_the_model_its_feedback(client: ToolOps, shop: Shop) -> None:
    shop.fault("/inventory/reservations", fail_next=1, fail_status=409)
    model = FakeModel(
        RESPONSES,
        [
            response(
                ("call_q", "query_stock", {"sku": "A12"}),
                ("call_r", "reserve_stock", {"sku": "A12", "qty": 1}),
                text="Reserving.",
            ),
            response(text="The reservation failed."),
        ],
    )
    llm = openai_llm(model)
    tools = responses_tools(client)

    with client.run() as run:
        items: list[Any] = [{"role": "user", "content": "Reserve one A12."}]
        for turn in range(10):
            answer = llm.responses.create(model=MODEL, input=items, tools=tools)
            items += answer.output
            outputs = run_function_calls(run, answer.output, step_index=turn)
            if not outputs:
                break
            items += outputs
    calls = {c["tool_call_id"]: c for c in run.get()["calls"]}

    first, second = model.sent
    assert first["tools"] == tools
    outputs = [i for i in second["input"] if i.get("type") == "function_call_output"]
    told = {i["call_id"]: i["output"] for i in outputs}
    assert calls["call_r"]["status"] == "failed"
    assert told["call_r"] == calls["call_r"]["feedback"] and "reserve_stock" in told["call_r"]
    assert json.loads(told["call_q"]) == calls["call_q"]["result"]
    # The model's own items went back before the outputs, as the SDK serialised them.
    assert [i.get("type") for i in second["input"][1:]] == [
        "message",
        "function_call",
        "function_call",
        "function_call_output",
        "function_call_output",
    ]
    assert shop.state()["reservations"] == []


def test_chat_a_charge_waits_for_approval_then_the_same_turn_tells_its_result(
    client: ToolOps, shop: Shop, worker: Callable[..., Worker], django_user_model: Any
) -> None:
    rita = make_user(django_user_model, "rita", "reviewers")
    model = FakeModel(CHAT, [completion(("call_c", "charge", CHARGE)), completion(text="Charged.")])
    llm = openai_llm(model)
    tools = openai_tools(client)
    run = client.open_run()
    messages: list[Any] = [{"role": "user", "content": "Charge order ord-1 9.50."}]
    answer = llm.chat.completions.create(model=MODEL, messages=messages, tools=tools)
    message = answer.choices[0].message
    messages.append(message)

    [held] = run_tool_calls(run, message.tool_calls, step_index=0)

    [call] = run.get()["calls"]
    assert call["status"] == "pending_approval"
    assert held["content"].startswith("charge is waiting for a reviewer because it cannot")
    assert "/api/v1" not in held["content"]  # the API's poll advice is for code, not models
    assert shop.requests("/payments/charges") == []

    carried_out(approve(rita), worker(**FAST))
    # The agent sends the same turn again: same tool-call ids, same step_index.
    messages += run_tool_calls(run, message.tool_calls, step_index=0)
    final = llm.chat.completions.create(model=MODEL, messages=messages, tools=tools)
    run.complete()

    assert final.choices[0].message.content == "Charged."
    assert len(shop.requests("/payments/charges")) == 1
    told = model.sent[1]["messages"][-1]
    assert (told["role"], told["tool_call_id"]) == ("tool", "call_c")
    result = json.loads(told["content"])
    assert result["charge_id"] == shop.state()["charges"][0]["charge_id"]
    assert len(run.get()["calls"]) == 1


@pytest.mark.parametrize(
    ("call_id", "name"),
    [("call_1\n", "query_stock"), ("call 1", "query_stock"), ("call_1", "query_stock\n")],
)
def test_a_model_id_or_name_the_api_would_refuse_is_refused_before_sending(
    call_id: str, name: str
) -> None:
    # Nothing listens on port 1: InvalidId, not a connection error, shows nothing was sent.
    client = ToolOps("http://127.0.0.1:1", "token")
    tool_call = {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}
    with pytest.raises(InvalidId):
        run_tool_calls(Run(client, {"run_id": "r-1"}), [tool_call], step_index=0)
    client.close()
