"""OpenAI Agents SDK through ToolOps: the catalog as the SDK's function tools.

    tools = await agents_tools(run)              # run: an AsyncRun
    agent = Agent(name="clerk", instructions="...", tools=tools.tools)
    result = await Runner.run(agent, "Order one A12", hooks=tools.hooks)
    while result.interruptions:                  # ToolOps holds a call for a reviewer
        state = await tools.wait_for_reviewers(result, timeout=600)
        result = await Runner.run(agent, state, hooks=tools.hooks)

The model's call id becomes the call's tool_call_id, and the turn its step_index: the same
write asked twice in one turn is one call, and a resumed turn answers the recorded calls.
`hooks` count the turns (the SDK tells a tool its call id, not its turn): pass them to
every Runner.run, or call `tools.note_response(response)` from your own `on_llm_end`.

A tool that requires approval pauses the run the SDK's way: its call is sent to ToolOps
before the SDK decides whether to run it, and one that ToolOps holds becomes an
interruption. Reviewers decide in the ToolOps console, not in the SDK: `wait_for_reviewers`
long-polls their decisions into the run's state (approved, or rejected with ToolOps'
feedback as the message), and the resumed run answers the model with the call's outcome.
A call still held at the end of `wait` (e.g. a possible duplicate) tells the model that it
waits, and the same call asked again answers with the outcome."""

from __future__ import annotations

import json
import time
from typing import Any

from agents import (
    FunctionTool,
    ModelResponse,
    RunContextWrapper,
    RunHooks,
    RunResult,
    RunResultStreaming,
    RunState,
    UserError,
)
from agents.tool_context import ToolContext

from toolops.client import AsyncRun, Call

from . import field, model_text

# What OpenAI's strict mode accepts as is; any other keyword makes a tool non-strict.
STRICT_KEYWORDS = {
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "enum",
    "description",
    "title",
    "anyOf",
    "const",
}


async def agents_tools(run: AsyncRun, *, wait: float = 30.0, pause: bool = True) -> AgentsTools:
    """The catalog's tools for this ToolOps run. `wait`: seconds a tool long-polls a call
    held or still in progress; `pause=False` long-polls approvals too, instead of pausing."""
    if run.data.get("calls_next"):  # a reopened long run: its steps are in every page
        run.data = {**run.data, "calls": await run.calls()}
    return AgentsTools(run, await run.tools(), wait=wait, pause=pause)


class AgentsTools:
    """Function tools bound to one ToolOps run, and the hooks that count its turns."""

    def __init__(
        self,
        run: AsyncRun,
        catalog: list[dict[str, Any]],
        *,
        wait: float = 30.0,
        pause: bool = True,
    ) -> None:
        self.run = run
        self.wait = wait
        # A reopened run keeps its calls' steps: a resumed turn must send the same ones.
        recorded = run.data.get("calls") or []
        self.steps: dict[str, int] = {c["tool_call_id"]: c["step_index"] for c in recorded}
        self.next_step = max(self.steps.values(), default=-1) + 1
        self.held: dict[tuple[str, str], Call] = {}  # told to the model while waiting
        self.tools = [self._tool(spec, pause=pause) for spec in catalog]
        self.names = {t.name for t in self.tools}
        self.hooks = TurnHooks(self)

    def note_response(self, response: ModelResponse) -> None:
        """One model turn: its function calls share the next step_index."""
        self.turn(
            [
                field(item, "call_id")
                for item in response.output
                if field(item, "type") == "function_call"
            ]
        )

    def turn(self, call_ids: list[str]) -> None:
        """Calls of one turn: those not yet known take the step of one that is (a paused
        turn resumed after a restart), else the next step."""
        known = [self.steps[c] for c in call_ids if c in self.steps]
        if len(known) < len(call_ids):
            step = known[0] if known else self.next_step
            self.next_step = max(self.next_step, step + 1)
            for call_id in call_ids:
                self.steps.setdefault(call_id, step)

    async def submit(
        self, tool: str, args: dict[str, Any] | str, call_id: str, *, wait: float
    ) -> Call:
        """The call, sent (again: the same request answers the recorded call), long-polled
        for up to `wait` seconds while it is held or in progress."""
        started = time.monotonic()
        if call_id not in self.steps:
            raise UserError(
                f"ToolOps does not know the turn of tool call {call_id}: pass "
                "hooks=tools.hooks to every Runner.run (or call tools.note_response from your "
                "on_llm_end hook), and resume a paused run through tools.wait_for_reviewers"
            )
        step = self.steps[call_id]
        call = await self.run.call(tool, args, step_index=step, tool_call_id=call_id, wait=wait)
        if call.waiting:
            call = await self.run.wait(call, timeout=wait - (time.monotonic() - started))
        return call

    async def wait_for_reviewers(
        self, result: RunResult | RunResultStreaming | RunState, *, timeout: float
    ) -> RunState:
        """The paused run's state, with each call ToolOps' reviewers decided within `timeout`
        approved (its outcome answers the model) or rejected (with ToolOps' feedback).
        Undecided calls stay interrupted: run the state again later, or wait again."""
        state = result if isinstance(result, RunState) else result.to_state()
        deadline = time.monotonic() + timeout
        # Not a ToolOps tool: its approval is the caller's.
        items = [
            (tool, i)
            for i in state.get_interruptions()
            if (tool := i.tool_name) is not None and tool in self.names
        ]
        self.turn([field(i.raw_item, "call_id") for _, i in items])  # all of the paused turn
        for tool, item in items:
            call = await self.submit(
                tool,
                _args(field(item.raw_item, "arguments")),
                field(item.raw_item, "call_id"),
                wait=max(0.0, deadline - time.monotonic()),
            )
            if call.status == "rejected":
                state.reject(item, rejection_message=model_text(call))
            elif not call.waiting:
                state.approve(item)
        return state

    def _tool(self, spec: dict[str, Any], *, pause: bool) -> FunctionTool:
        name = spec["name"]

        async def held(ctx: RunContextWrapper[Any], params: dict[str, Any], call_id: str) -> bool:
            # Sent now: ToolOps holds it (nothing reaches the downstream) or, when a policy
            # no longer requires approval, runs it; the invocation then reads the record.
            call = await self.submit(name, params, call_id, wait=0)
            return call.status == "pending_approval"

        async def invoke(ctx: ToolContext[Any], input_json: str) -> str:
            args = _args(input_json)
            key = (name, json.dumps(args, sort_keys=True))
            told = self.held.get(key)
            if told is not None and told.tool_call_id != ctx.tool_call_id:
                # The model asks again for a call it was told waits: answer that call.
                call = await self.run.client.call_get(told.call_id)
                call = await self.run.wait(call, timeout=self.wait)
            else:
                call = await self.submit(name, args, ctx.tool_call_id, wait=self.wait)
            if not call.waiting:
                self.held.pop(key, None)
                return model_text(call)
            self.held[key] = call
            return (
                f"{name} is waiting for a reviewer's decision; nothing was sent. Call {name} "
                "again with the same arguments to get the outcome; do not work around it."
            )

        schema = spec.get("params_schema") or {"type": "object", "properties": {}}
        return FunctionTool(
            name=name,
            description=spec.get("description") or name,
            params_json_schema=schema,
            on_invoke_tool=invoke,
            strict_json_schema=schema.get("type") == "object" and _strict_ok(schema),
            needs_approval=held if pause and spec.get("requires_approval") else False,
        )


class TurnHooks(RunHooks[Any]):
    """Run hooks that give each model turn's function calls one step_index."""

    def __init__(self, tools: AgentsTools) -> None:
        self.tools = tools

    async def on_llm_end(
        self, context: RunContextWrapper[Any], agent: Any, response: ModelResponse
    ) -> None:
        self.tools.note_response(response)


def _args(raw: str | None) -> dict[str, Any] | str:
    """The model's arguments as an object, or as sent when they are not one (ToolOps then
    answers invalid_args, with feedback the model can act on)."""
    if raw is None or not raw.strip():
        return {}
    try:
        parsed = json.loads(raw)
    except ValueError:
        return raw
    return parsed if isinstance(parsed, dict) else raw


def _strict_ok(schema: Any) -> bool:
    """Strict mode would change nothing: every property required, no open objects, and
    only keywords strict mode accepts (a format, a bound or a length makes it non-strict)."""
    if isinstance(schema, list):
        return all(_strict_ok(s) for s in schema)
    if not isinstance(schema, dict) or not set(schema) <= STRICT_KEYWORDS:
        return False
    props = schema.get("properties", {})
    if schema.get("type") == "object" and (
        set(props) != set(schema.get("required", [])) or schema.get("additionalProperties")
    ):
        return False
    return all(_strict_ok(s) for s in props.values()) and all(
        _strict_ok(schema[k]) for k in ("items", "anyOf") if k in schema
    )
