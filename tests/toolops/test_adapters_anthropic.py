"""The Anthropic helpers in the agent loop of docs/agents.md, against a live ToolOps server
and the shop: the real `anthropic.Anthropic` client talks to an offline model at its
network edge, and the helpers take its `response.content` blocks. A failing tool is a
`tool_result` with `is_error` and the feedback; the same order asked twice is one order;
a charge long-polled with `wait=` answers its result once a reviewer approved it and the
worker ran it."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

import anthropic
import httpx2
import pytest
from django.db import connection

from tests.conftest import Shop
from tests.console.conftest import make_user
from tests.toolops.adapters_helpers import CHARGE, FAST, ORDER, FakeModel, approve, carried_out
from tests.waiting import wait_until
from tests.worker import Worker
from toolops.adapters.anthropic import anthropic_tools, tool_results_message
from toolops.client import Run, ToolOps
from toolops.models import Approval, ToolPolicy

MODEL = "claude-test"
MESSAGES = "/v1/messages"


@pytest.fixture
def client(toolops_server: Any, agent_a: tuple[Any, str], shop: Shop) -> ToolOps:
    return ToolOps(toolops_server().url, agent_a[1])


def claude(*uses: tuple[str, str, dict[str, Any]], text: str | None = None) -> Any:
    """A Messages API answer: `text`, then `uses` as (id, tool, input) tool_use blocks."""
    content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    content += [
        {"type": "tool_use", "id": use_id, "name": name, "input": args}
        for use_id, name, args in uses
    ]
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": content,
        "stop_reason": "tool_use" if uses else "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 5},
    }


def claude_agent(model: FakeModel, run: Run, tools: list[Any], *, wait: float = 0) -> Any:
    """The Messages loop of docs/agents.md; the model's last answer."""
    # Anthropic's SDK takes only an httpx2 client.
    llm = anthropic.Anthropic(api_key="test", http_client=model.http_client(), max_retries=0)
    messages: list[Any] = [{"role": "user", "content": "Go ahead."}]
    for turn in range(10):
        answer = llm.messages.create(model=MODEL, max_tokens=1024, messages=messages, tools=tools)
        messages.append({"role": "assistant", "content": answer.content})
        if answer.stop_reason != "tool_use":
            break
        messages.append(tool_results_message(run, answer.content, step_index=turn, wait=wait))
    return answer


def told(model: FakeModel, turn: int) -> dict[str, dict[str, Any]]:
    """The tool_result blocks the model was sent on `turn`, by tool_use id."""
    message = model.sent[turn]["messages"][-1]
    assert message["role"] == "user"
    return {block["tool_use_id"]: block for block in message["content"]}


def test_the_tool_list_comes_in_anthropics_shape(client: ToolOps) -> None:
    tools = {t["name"]: t for t in anthropic_tools(client)}
    assert tools["reserve_stock"]["input_schema"]["required"] == ["sku", "qty"]
    assert set(tools["reserve_stock"]) == {"name", "description", "input_schema"}
    assert "release_stock" not in tools  # internal tools are not offered
    assert set(tools) == {t["name"] for t in client.tools()}


def test_a_failing_tool_is_an_error_result_with_its_feedback(client: ToolOps, shop: Shop) -> None:
    shop.fault("/inventory/stock", fail_next=5, fail_status=400)
    model = FakeModel(
        MESSAGES,
        [
            claude(("toolu_1", "query_stock", {"sku": "A12"}), text="Let me look."),
            claude(text="The stock service refused."),
        ],
        http=httpx2,
    )
    tools = anthropic_tools(client)

    with client.run() as run:
        claude_agent(model, run, tools)

    [call] = run.get()["calls"]
    assert model.sent[0]["tools"] == tools
    # The assistant's turn went back as the SDK serialised its blocks.
    assert [b["type"] for b in model.sent[1]["messages"][1]["content"]] == ["text", "tool_use"]
    result = told(model, 1)["toolu_1"]
    assert call["status"] == "failed"
    assert result == {
        "type": "tool_result",
        "tool_use_id": "toolu_1",
        "content": call["feedback"],
        "is_error": True,
    }
    assert "query_stock" in result["content"]


def test_an_order_asked_twice_in_a_turn_is_one_order(client: ToolOps, shop: Shop) -> None:
    ToolPolicy.objects.create(tool="create_order", requires_approval=False)
    model = FakeModel(
        MESSAGES,
        [
            claude(("toolu_1", "create_order", ORDER), ("toolu_2", "create_order", ORDER)),
            claude(text="Ordered."),
        ],
        http=httpx2,
    )

    with client.run() as run:
        claude_agent(model, run, anthropic_tools(client))

    assert len(shop.requests("/orders")) == 1
    results = told(model, 1)
    assert list(results) == ["toolu_1", "toolu_2"]
    assert "is_error" not in results["toolu_1"] and "is_error" not in results["toolu_2"]
    assert results["toolu_1"]["content"] == results["toolu_2"]["content"]
    order = json.loads(results["toolu_1"]["content"])
    assert order["order_id"] == shop.state()["orders"][0]["order_id"]


def test_a_charge_long_polled_answers_its_result_once_approved_and_run(
    client: ToolOps, shop: Shop, worker: Callable[..., Worker], django_user_model: Any
) -> None:
    rita = make_user(django_user_model, "rita", "reviewers")
    model = FakeModel(
        MESSAGES, [claude(("toolu_c", "charge", CHARGE)), claude(text="Charged.")], http=httpx2
    )
    w = worker(**FAST)

    def reviewer() -> None:
        # While the agent's call waits: approve it once it is there, and let the worker
        # carry it out.
        try:
            wait_until(lambda: Approval.objects.pending().exists())
            carried_out(approve(rita), w)
        finally:
            connection.close()

    thread = threading.Thread(target=reviewer)
    thread.start()
    with client.run() as run:
        answer = claude_agent(model, run, anthropic_tools(client), wait=30)
    thread.join()

    assert answer.content[0].text == "Charged."
    assert len(shop.requests("/payments/charges")) == 1
    result = told(model, 1)["toolu_c"]
    assert "is_error" not in result
    assert json.loads(result["content"])["charge_id"] == shop.state()["charges"][0]["charge_id"]
