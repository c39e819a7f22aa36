"""The OpenAI Agents SDK adapter against a real ToolOps server and the shop, driven by the
SDK's own Runner and its offline ScriptedModel (no network, no API key): the same write
asked twice in a turn is one write; a failing tool answers the model with the call's
feedback; a charge that needs approval pauses the run, and the run resumes — in a new
client, from its saved state — once a reviewer approved it in ToolOps and a worker ran it;
without pausing, the model is told the call waits, and asking again answers it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest
from agents import Agent, Runner, RunState, UserError, set_tracing_disabled
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call
from django.db import connection

from tests.conftest import Shop
from tests.console.conftest import make_user
from tests.toolops.adapters_helpers import CHARGE, FAST, ORDER, approve, carried_out
from tests.worker import Worker
from toolops.adapters.agents import AgentsTools, agents_tools
from toolops.client import AsyncToolOps
from toolops.models import ToolCall, ToolPolicy

set_tracing_disabled(True)


@pytest.fixture
def server(toolops_server: Any, shop: Shop) -> Any:
    return toolops_server()


def clerk(model: ScriptedModel, tools: AgentsTools) -> Agent[Any]:
    return Agent(name="clerk", instructions="Serve the customer.", model=model, tools=tools.tools)


def outputs(model: ScriptedModel, turn: int) -> dict[str, str]:
    """The function_call_output items the model received at the start of `turn`."""
    items = model.calls[turn].input
    return {i["call_id"]: i["output"] for i in items if i.get("type") == "function_call_output"}


def run_agent(url: str, token: str, model: ScriptedModel, prompt: str) -> Any:
    """The agent's run, in a ToolOps run completed when it ends: (its result, the run)."""

    async def go() -> Any:
        async with AsyncToolOps(url, token) as client, client.run() as run:
            tools = await agents_tools(run)
            return await Runner.run(clerk(model, tools), prompt, hooks=tools.hooks), run

    return asyncio.run(go())


def test_the_catalog_becomes_function_tools(server: Any, agent_a: tuple[Any, str]) -> None:
    async def go() -> tuple[list[Any], list[dict[str, Any]]]:
        async with AsyncToolOps(server.url, agent_a[1]) as client:
            run = await client.open_run()
            return (await agents_tools(run)).tools, await client.tools()

    tools, catalog = asyncio.run(go())

    by_name = {t.name: t for t in tools}
    assert set(by_name) == {t["name"] for t in catalog} and "release_stock" not in by_name
    order = by_name["create_order"]
    assert order.params_json_schema["required"] == ["sku", "qty", "amount"]
    # A decimal format and a minimum are not strict mode's: that tool stays non-strict.
    assert (order.strict_json_schema, by_name["query_stock"].strict_json_schema) == (False, True)
    assert callable(by_name["charge"].needs_approval)
    assert by_name["query_stock"].needs_approval is False


def test_a_write_asked_twice_in_a_turn_is_one_write(
    server: Any, agent_a: tuple[Any, str], shop: Shop
) -> None:
    ToolPolicy.objects.create(tool="create_order", requires_approval=False)
    model = ScriptedModel(
        [
            [
                function_call("create_order", ORDER, call_id="call_1"),
                function_call("create_order", ORDER, call_id="call_2"),
            ],
            [assistant_message("Ordered.")],
        ]
    )

    result, run = run_agent(server.url, agent_a[1], model, "One A12, please.")

    assert result.final_output == "Ordered."
    first = outputs(model, 1)
    assert set(first) == {"call_1", "call_2"}
    assert first["call_1"] == first["call_2"] and json.loads(first["call_1"])["order_id"]
    assert len(shop.requests("/orders")) == 1
    # One call, at the turn's step; the other call id was answered as its replay.
    [call] = ToolCall.objects.filter(run__run_id=run.run_id)
    assert call.tool_call_id in ("call_1", "call_2") and call.step_index == 0


def test_a_failing_tool_gives_the_model_its_feedback(
    server: Any, agent_a: tuple[Any, str], shop: Shop
) -> None:
    shop.fault("/inventory/reservations", fail_next=1, fail_status=400)
    model = ScriptedModel(
        [
            [function_call("reserve_stock", {"sku": "A12", "qty": 1}, call_id="call_1")],
            [function_call("query_stock", {"sku": "A12"}, call_id="call_2")],
            [assistant_message("A12 cannot be reserved now.")],
        ]
    )

    result, run = run_agent(server.url, agent_a[1], model, "Reserve one A12.")

    failed = ToolCall.objects.get(run__run_id=run.run_id, tool_call_id="call_1")
    assert failed.status == "failed" and failed.feedback
    assert outputs(model, 1) == {"call_1": failed.feedback}
    assert json.loads(outputs(model, 2)["call_2"])["sku"] == "A12"
    assert result.final_output == "A12 cannot be reserved now."
    steps = ToolCall.objects.filter(run__run_id=run.run_id).order_by("step_index")
    assert [(c.tool_call_id, c.step_index) for c in steps] == [("call_1", 0), ("call_2", 1)]


def test_without_the_turn_hooks_the_run_fails_loudly(
    server: Any, agent_a: tuple[Any, str], shop: Shop
) -> None:
    model = ScriptedModel([[function_call("query_stock", {"sku": "A12"}, call_id="call_1")]])

    async def go() -> None:
        async with AsyncToolOps(server.url, agent_a[1]) as client, client.run() as run:
            tools = await agents_tools(run)
            await Runner.run(clerk(model, tools), "Stock of A12?")

    with pytest.raises(UserError, match="hooks=tools.hooks"):
        asyncio.run(go())
    assert shop.requests("/inventory/stock") == []


def test_a_charge_that_needs_approval_pauses_and_resumes_once_approved(
    server: Any,
    agent_a: tuple[Any, str],
    shop: Shop,
    worker: Callable[..., Worker],
    django_user_model: Any,
) -> None:
    model = ScriptedModel(
        [
            [
                function_call("charge", CHARGE, call_id="call_1"),
                function_call("charge", CHARGE, call_id="call_2"),
            ],
            [assistant_message("Charged.")],
        ]
    )

    async def pause() -> tuple[str, str, Any]:
        async with AsyncToolOps(server.url, agent_a[1]) as client:
            run = await client.open_run()
            tools = await agents_tools(run)
            result = await Runner.run(clerk(model, tools), "Charge ord-1.", hooks=tools.hooks)
            return run.run_id, result.to_state().to_string(), result

    run_id, saved, paused = asyncio.run(pause())

    # Both asks pause the run; ToolOps holds one call (the second is its replay).
    assert [i.tool_name for i in paused.interruptions] == ["charge", "charge"]
    assert paused.final_output is None
    [held] = ToolCall.objects.filter(run__run_id=run_id)
    assert held.status == "pending_approval"
    assert shop.requests("/payments/charges") == []

    approve(make_user(django_user_model, "rita", "reviewers"))
    w = worker(**FAST)

    async def resume() -> Any:
        # Another client, as after a restart: the run reopened by its id, the state reloaded.
        async with AsyncToolOps(server.url, agent_a[1]) as client:
            run = await client.open_run(run_id=run_id)
            tools = await agents_tools(run)
            agent = clerk(model, tools)
            state = await RunState.from_string(agent, saved)
            state = await tools.wait_for_reviewers(state, timeout=30)
            result = await Runner.run(agent, state, hooks=tools.hooks)
            await run.complete()
            return result

    result = asyncio.run(resume())

    assert result.final_output == "Charged.", w.output()
    assert len(shop.requests("/payments/charges")) == 1
    answers = outputs(model, 1)
    assert answers["call_1"] == answers["call_2"]
    answer = json.loads(answers["call_1"])
    assert answer["charge_id"] and answer["amount"] == CHARGE["amount"]
    assert ToolCall.objects.get(call_id=held.call_id).status == "succeeded"


def test_without_pausing_a_held_call_waits_and_the_same_call_again_answers_it(
    server: Any,
    agent_a: tuple[Any, str],
    shop: Shop,
    worker: Callable[..., Worker],
    django_user_model: Any,
) -> None:
    rita = make_user(django_user_model, "rita", "reviewers")
    w = worker(**FAST)

    def approve_and_run() -> None:
        carried_out(approve(rita), w)
        connection.close()  # this thread's own connection

    async def decided_then_ask_again(call: Any) -> list[Any]:
        # Between the turns a reviewer approves the charge and the worker runs it.
        await asyncio.to_thread(approve_and_run)
        return [function_call("charge", CHARGE, call_id="call_2")]

    model = ScriptedModel(
        [
            [function_call("charge", CHARGE, call_id="call_1")],
            ModelStep.respond(decided_then_ask_again),
            [assistant_message("Charged.")],
        ]
    )

    async def go() -> Any:
        async with AsyncToolOps(server.url, agent_a[1]) as client, client.run() as run:
            tools = await agents_tools(run, wait=0.5, pause=False)
            return await Runner.run(clerk(model, tools), "Charge ord-1.", hooks=tools.hooks)

    result = asyncio.run(go())

    waiting = outputs(model, 1)["call_1"]
    assert "waiting for a reviewer" in waiting and "same arguments" in waiting
    answer = json.loads(outputs(model, 2)["call_2"])
    assert answer["charge_id"] == ToolCall.objects.get().result["charge_id"]
    assert result.final_output == "Charged."
    assert len(shop.requests("/payments/charges")) == 1
    assert ToolCall.objects.count() == 1  # asked again: answered, not sent again
