"""LangChain and LangGraph tool calling through ToolOps.

    run = client.open_run(run_id=thread_id)      # stays open while the graph may pause
    tools = langchain_tools(run)                 # the catalog as StructuredTools
    graph = ...ToolNode(tools)..., compiled with a checkpointer
    state = graph.invoke({"messages": [...]}, config)
    if state.get("__interrupt__"):               # a call waits for a reviewer
        state = graph.invoke(Command(resume=True), config)   # once the reviewer decided
    run.complete()

In a LangGraph ToolNode each tool reads its ToolRuntime: the model's tool-call id becomes
the call's tool_call_id, and the turn its step_index. The turn is the position, in the
graph's messages, of the AIMessage that asked for the call: it is checkpointed with the
graph, so the turn run again after a resume (or a crash) asks ToolOps the same questions
and gets the recorded calls back instead of running them twice.

A call that may not be used answers the model with its feedback, as a ToolMessage with
status "error". A call waiting for approval interrupts the graph (langgraph.types.interrupt)
with what a reviewer needs. Resumed, the ToolNode runs the turn again: the tool gets the
same call back and, once the reviewer has decided, long-polls for its outcome; while the
approval is still pending the graph pauses again. The decision is ToolOps': the resume
value is not read.

Outside a graph the tools still run (their own step each, with no id from the model, and
a call waiting for approval answered with its feedback); a plain LangChain loop keeps the
ids and the turn with `tool_messages(run, ai_message, step_index=turn)`.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import BaseTool, BaseToolkit, StructuredTool, ToolException
from pydantic import ConfigDict

from toolops.client import AsyncRun, Call, Run

from . import model_text

try:
    from langgraph.prebuilt import ToolRuntime
except ImportError:  # plain LangChain: no graph injects a runtime
    # An optional import's stand-in, which mypy takes for a second definition of the class.
    ToolRuntime = Any  # type: ignore[misc, assignment]

DECISION_WAIT_S = 60.0


def langchain_tools(
    run: Run, *, wait: float = 0, timeout: float = DECISION_WAIT_S
) -> list[BaseTool]:
    """The catalog as StructuredTools calling through `run`. `wait` (≤ 30 s) holds a call's
    first answer while it waits for a person; `timeout` is how long a resumed call, once
    its approval is decided (or a call in progress), long-polls for its outcome."""

    def build(spec: dict[str, Any]) -> BaseTool:
        name = spec["name"]

        # Annotated ToolRuntime (not Optional): what makes a ToolNode inject it, and keeps
        # it out of LangChain's traces. None outside a graph. LangGraph reads the annotation
        # at run time, so the None default cannot be typed as mypy would have it.
        def call_tool(runtime: ToolRuntime = None, **args: Any) -> Any:  # type: ignore[assignment]
            tool_call_id, step = _turn(runtime)
            call = run.call(name, args, step_index=step, tool_call_id=tool_call_id, wait=wait)
            while runtime is not None and call.status == "pending_approval":
                _pause(run, call, args)  # answered once the graph is resumed
                call = run.client.call_get(call.call_id)
            if call.status == "in_progress":
                call = run.wait(call, timeout=timeout)
            return _answer(call)

        return _structured(spec, func=call_tool)

    return [build(spec) for spec in run.tools()]


async def alangchain_tools(
    run: AsyncRun, *, wait: float = 0, timeout: float = DECISION_WAIT_S
) -> list[BaseTool]:
    """`langchain_tools` for asyncio graphs (`ainvoke`), through an AsyncRun."""

    def build(spec: dict[str, Any]) -> BaseTool:
        name = spec["name"]

        # ToolRuntime, not Optional, as in langchain_tools' call_tool.
        async def call_tool(runtime: ToolRuntime = None, **args: Any) -> Any:  # type: ignore[assignment]
            tool_call_id, step = _turn(runtime)
            call = await run.call(name, args, step_index=step, tool_call_id=tool_call_id, wait=wait)
            while runtime is not None and call.status == "pending_approval":
                _pause(run, call, args)
                call = await run.client.call_get(call.call_id)
            if call.status == "in_progress":
                call = await run.wait(call, timeout=timeout)
            return _answer(call)

        return _structured(spec, coroutine=call_tool)

    return [build(spec) for spec in await run.tools()]


class ToolOpsToolkit(BaseToolkit):
    """The catalog as a LangChain toolkit: `ToolOpsToolkit(run=run).get_tools()`."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    run: Run
    wait: float = 0
    timeout: float = DECISION_WAIT_S

    def get_tools(self) -> list[BaseTool]:
        return langchain_tools(self.run, wait=self.wait, timeout=self.timeout)


def tool_messages(
    run: Run, message: AIMessage, *, step_index: int, wait: float = 0
) -> list[ToolMessage]:
    """A plain LangChain loop: run an AIMessage's tool calls; the ToolMessages to send
    back, in order, with status "error" when the call may not be used."""
    messages = []
    for tool_call in message.tool_calls:
        call = run.call(
            tool_call["name"],
            tool_call["args"],
            step_index=step_index,
            tool_call_id=tool_call["id"],
            wait=wait,
        )
        messages.append(
            ToolMessage(
                content=model_text(call),
                tool_call_id=tool_call["id"],
                name=call.tool,
                status="success" if call.ok else "error",
                artifact=call.raw,
            )
        )
    return messages


def _structured(spec: dict[str, Any], **body: Any) -> BaseTool:
    return StructuredTool.from_function(
        **body,
        name=spec["name"],
        description=spec.get("description") or spec["name"],
        # The catalog's JSON Schema as it is: the model sees what ToolOps validates.
        args_schema=spec["params_schema"],
        # The content is for the model, the artifact (the whole call) for the application.
        response_format="content_and_artifact",
        # A ToolException becomes the ToolMessage, with status "error".
        handle_tool_error=True,
        metadata={"kind": spec.get("kind"), "requires_approval": spec.get("requires_approval")},
    )


def _turn(runtime: Any) -> tuple[str | None, int | None]:
    """The model's tool-call id and the turn that asked for it: the position of its
    AIMessage in the graph's messages (None, None outside a graph: the run counts)."""
    if runtime is None:
        return None, None
    state = runtime.state
    if isinstance(state, list):
        messages = state
    elif isinstance(state, dict):
        messages = state.get("messages") or []
    else:
        messages = getattr(state, "messages", None) or []
    for index, message in reversed(list(enumerate(messages))):
        if isinstance(message, AIMessage) and any(
            tool_call["id"] == runtime.tool_call_id for tool_call in message.tool_calls
        ):
            return runtime.tool_call_id, index
    return runtime.tool_call_id, None


def _pause(run: Run | AsyncRun, call: Call, args: dict[str, Any]) -> None:
    """Interrupt the graph for a reviewer. A resumed turn runs this again and LangGraph
    answers each interrupt already resumed at once, so only a new one pauses."""
    # LangGraph (~0.4 s to import on top of langchain-core) only when a call waits for a
    # reviewer inside a graph: a plain LangChain loop never loads it.
    from langgraph.types import interrupt  # noqa: PLC0415

    approval = call.approval or {}
    url = approval.get("url")
    interrupt(
        {
            "type": "toolops.approval",
            "tool": call.tool,
            "args": args,
            "run_id": run.run_id,
            "call_id": call.call_id,
            "tool_call_id": call.tool_call_id,
            "approval_id": approval.get("approval_id"),
            "reason": approval.get("reason"),
            "duplicate_of": approval.get("duplicate_of"),
            "url": f"{run.client.url}{url}" if url else None,
            "expires_at": approval.get("expires_at"),
            "feedback": call.feedback,
        }
    )


def _answer(call: Call) -> tuple[str, Any]:
    if not call.ok:
        raise ToolException(model_text(call))
    return model_text(call), call.raw
