"""The LangChain / LangGraph adapter against a real ToolOps server and the shop, driven by a
LangGraph graph (a model node, a ToolNode, a checkpointer) and LangChain's own offline
fake chat model: the same write asked twice in a turn is one write; a failing tool answers
the model with its feedback as an error; a charge that needs approval pauses the graph,
which goes on with the charge's result once a reviewer approved it in the console."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from typing import Any
from unittest.mock import patch

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatResult
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import Command
from pydantic import Field

from tests.conftest import Shop
from tests.console.conftest import make_user
from tests.worker import Worker
from toolops.adapters.langchain import (
    ToolOpsToolkit,
    alangchain_tools,
    langchain_tools,
    tool_messages,
)
from toolops.approvals.services import approval_decide
from toolops.client import AsyncToolOps, ToolOps
from toolops.models import Approval, ToolPolicy

ORDER = {"sku": "A12", "qty": 1, "amount": "9.50"}
CHARGE = {"order_id": "ord-9", "amount": "199.00"}
THREAD = {"configurable": {"thread_id": "conv-42"}}
FAST = {"TOOLOPS_APPROVAL_SWEEP_S": "0.5", "TOOLOPS_APPROVAL_GRACE_S": "1"}


class ScriptedModel(GenericFakeChatModel):
    """LangChain's offline fake chat model, answering from its script. The fake has no
    bind_tools: this one takes the tools (as a provider would be sent them) and keeps
    every conversation it was asked to continue."""

    offered: list[dict[str, Any]] = Field(default_factory=list)
    seen: list[list[BaseMessage]] = Field(default_factory=list)

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedModel:  # type: ignore[override]
        self.offered = [convert_to_openai_tool(tool) for tool in tools]
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        self.seen.append(list(messages))
        return super()._generate(messages, *args, **kwargs)


def script(*turns: AIMessage | str) -> ScriptedModel:
    return ScriptedModel(messages=iter(turns))


def asks(*calls: tuple[str, str, dict[str, Any]]) -> AIMessage:
    """A model turn asking for tool calls: (its id, tool, args) each."""
    return AIMessage(
        content="", tool_calls=[{"id": i, "name": name, "args": args} for i, name, args in calls]
    )


def agent_graph(model: ScriptedModel, tools: list[BaseTool]) -> Any:
    """The usual agent loop: the model, then its tool calls in a ToolNode, until it answers."""
    bound = model.bind_tools(tools)

    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [bound.invoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolNode(tools))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    return graph.compile(checkpointer=InMemorySaver())


def tool_results(state: dict[str, Any]) -> dict[str, ToolMessage]:
    return {m.tool_call_id: m for m in state["messages"] if isinstance(m, ToolMessage)}


@pytest.fixture
def client(toolops_server: Any, agent_a: tuple[Any, str], shop: Shop) -> ToolOps:
    return ToolOps(toolops_server().url, agent_a[1])


def test_it_offers_the_catalog_as_tools_that_also_run_outside_a_graph(
    client: ToolOps, shop: Shop
) -> None:
    run = client.open_run()
    tools = ToolOpsToolkit(run=run).get_tools()
    model = script("Nothing to do.")
    model.bind_tools(tools)

    offered = {t["function"]["name"]: t["function"] for t in model.offered}
    catalog = {t["name"]: t for t in client.tools()}
    assert set(offered) == set(catalog) and "release_stock" not in offered
    assert offered["create_order"]["parameters"] == catalog["create_order"]["params_schema"]
    assert offered["charge"]["description"] == catalog["charge"]["description"]

    # Invoked by hand: no graph to pause, so a held charge answers with its feedback.
    by_name = {tool.name: tool for tool in tools}
    stock = by_name["query_stock"].invoke(
        {"type": "tool_call", "id": "call_1", "name": "query_stock", "args": {"sku": "A12"}}
    )
    held = by_name["charge"].invoke(
        {"type": "tool_call", "id": "call_2", "name": "charge", "args": CHARGE}
    )
    assert (stock.tool_call_id, stock.status, json.loads(stock.content)["sku"]) == (
        "call_1",
        "success",
        "A12",
    )
    assert (held.tool_call_id, held.status) == ("call_2", "error")
    assert run.get()["calls"][1]["status"] == "pending_approval"
    assert held.content.startswith("charge is waiting for a reviewer because it cannot be undone")
    assert shop.requests("/payments/charges") == []
    run.complete()


def test_a_write_asked_twice_in_a_turn_is_one_order(client: ToolOps, shop: Shop) -> None:
    ToolPolicy.objects.create(tool="create_order", requires_approval=False)
    model = script(
        asks(("call_1", "create_order", ORDER), ("call_2", "create_order", ORDER)), "Done."
    )
    run = client.open_run()
    graph = agent_graph(model, langchain_tools(run))

    state = graph.invoke({"messages": [HumanMessage("Order one A12 at 9.50.")]}, THREAD)
    run.complete()

    first, second = tool_results(state)["call_1"], tool_results(state)["call_2"]
    assert first.status == second.status == "success"
    assert first.content == second.content and json.loads(first.content)["order_id"]
    assert len(shop.requests("/orders")) == 1
    # One call, answered twice: the model's id is its tool_call_id, the turn (the position
    # of the AIMessage that asked) its step_index.
    [call] = run.get()["calls"]
    assert (call["tool_call_id"] in ("call_1", "call_2"), call["step_index"]) == (True, 1)
    assert first.artifact["call_id"] == second.artifact["call_id"] == call["call_id"]
    assert sorted([first.artifact["replayed"], second.artifact["replayed"]]) == [False, True]
    assert model.seen[-1][-2:] == [first, second]  # what the model was told next
    assert state["messages"][-1].content == "Done."


def test_a_failing_tool_tells_the_model_its_feedback_as_an_error(
    client: ToolOps, shop: Shop
) -> None:
    shop.fault("/inventory/reservations", fail_next=1, fail_status=409)
    model = script(asks(("call_1", "reserve_stock", {"sku": "A12", "qty": 1})), "Sorry.")
    run = client.open_run()
    graph = agent_graph(model, langchain_tools(run))

    state = graph.invoke({"messages": [HumanMessage("Reserve one A12.")]}, THREAD)
    run.complete()

    [call] = run.get()["calls"]
    assert call["status"] == "failed" and "reserve_stock" in call["feedback"]
    failed = tool_results(state)["call_1"]
    assert (failed.status, failed.content) == ("error", call["feedback"])
    assert model.seen[-1][-1] == failed


def test_a_plain_loop_gets_tool_messages_and_a_turn_sent_again_the_record(
    client: ToolOps, shop: Shop
) -> None:
    shop.fault("/inventory/stock", fail_next=5, fail_status=400)
    reserve = {"sku": "A12", "qty": 1}
    turn = asks(
        ("call_1", "reserve_stock", reserve),
        ("call_2", "reserve_stock", reserve),
        ("call_3", "query_stock", {"sku": "A12"}),
    )
    with client.run() as run:
        messages = tool_messages(run, turn, step_index=0)
        again = tool_messages(run, turn, step_index=0)

    ok, twice, failed = messages
    assert [m.tool_call_id for m in messages] == ["call_1", "call_2", "call_3"]
    assert (ok.status, twice.status, failed.status) == ("success", "success", "error")
    assert ok.content == twice.content and "query_stock" in failed.content
    assert [m.content for m in again] == [m.content for m in messages]
    assert len(shop.requests("/inventory/reservations")) == 1
    assert len(shop.requests("/inventory/stock")) == 1


def held_charge(client: ToolOps) -> tuple[Any, Any, ScriptedModel, dict[str, Any]]:
    """A turn asking for the stock and a charge: the graph pauses for the charge."""
    model = script(
        asks(("call_q", "query_stock", {"sku": "A12"}), ("call_c", "charge", CHARGE)), "Charged."
    )
    run = client.open_run()
    graph = agent_graph(model, langchain_tools(run, timeout=60))
    state = graph.invoke({"messages": [HumanMessage("Charge order ord-9.")]}, THREAD)
    return run, graph, model, state


def test_a_charge_that_needs_approval_pauses_until_a_reviewer_approves_it(
    client: ToolOps, shop: Shop, worker: Callable[..., Worker], django_user_model: Any
) -> None:
    run, graph, model, state = held_charge(client)

    [pause] = state["__interrupt__"]
    approval = Approval.objects.get()
    assert pause.value["tool"] == "charge" and pause.value["args"] == CHARGE
    assert pause.value["tool_call_id"] == "call_c" and pause.value["reason"] == "irreversible"
    assert pause.value["approval_id"] == approval.approval_id
    assert pause.value["url"] == f"{client.url}/console/approvals/{approval.approval_id}/"
    assert graph.get_state(THREAD).interrupts == (pause,)
    assert shop.requests("/payments/charges") == []

    # Resumed before anyone decided: it pauses again, and nothing is charged.
    state = graph.invoke(Command(resume=True), THREAD)
    assert [p.value["call_id"] for p in state["__interrupt__"]] == [pause.value["call_id"]]
    assert shop.requests("/payments/charges") == []

    rita = make_user(django_user_model, "rita", "reviewers")
    # The worker's sweep starts it (the test process shares no broker with the worker).
    with patch("toolops.tasks.execute_approved_call.delay", autospec=True):
        approval_decide(
            approval=approval, by=rita, approve=True, note="", args_hash=approval.args_hash
        )
    worker(**FAST)
    # The tool long-polls while the worker runs the approved charge.
    state = graph.invoke(Command(resume=True), THREAD)
    run.complete()

    assert "__interrupt__" not in state and not graph.get_state(THREAD).interrupts
    charged = tool_results(state)["call_c"]
    assert charged.status == "success" and json.loads(charged.content)["charge_id"]
    assert model.seen[-1][-1] == charged and state["messages"][-1].content == "Charged."
    assert len(shop.requests("/payments/charges")) == 1
    # The turn ran three times; its stock query was answered from the record.
    assert len(shop.requests("/inventory/stock")) == 1


def test_a_rejected_charge_tells_the_model_the_reviewers_note(
    client: ToolOps, shop: Shop, django_user_model: Any
) -> None:
    run, graph, model, state = held_charge(client)
    assert state["__interrupt__"]
    approval = Approval.objects.get()
    rita = make_user(django_user_model, "rita", "reviewers")
    approval_decide(
        approval=approval,
        by=rita,
        approve=False,
        note="Customer cancelled",
        args_hash=approval.args_hash,
    )

    state = graph.invoke(Command(resume=True), THREAD)
    run.complete()

    call = next(c for c in run.get()["calls"] if c["tool"] == "charge")
    rejected = tool_results(state)["call_c"]
    assert (rejected.status, rejected.content) == ("error", call["feedback"])
    assert "Customer cancelled" in rejected.content
    assert model.seen[-1][-1] == rejected
    assert shop.requests("/payments/charges") == []


def test_an_async_graph_asking_twice_makes_one_order(
    toolops_server: Any, agent_a: tuple[Any, str], shop: Shop
) -> None:
    ToolPolicy.objects.create(tool="create_order", requires_approval=False)
    model = script(
        asks(("call_1", "create_order", ORDER), ("call_2", "create_order", ORDER)), "Done."
    )
    url = toolops_server().url

    async def converse() -> dict[str, Any]:
        async with AsyncToolOps(url, agent_a[1]) as client, client.run() as run:
            graph = agent_graph(model, await alangchain_tools(run))
            return await graph.ainvoke({"messages": [HumanMessage("Order one A12.")]}, THREAD)

    state = asyncio.run(converse())

    first, second = tool_results(state)["call_1"], tool_results(state)["call_2"]
    assert first.status == second.status == "success" and first.content == second.content
    assert len(shop.requests("/orders")) == 1
