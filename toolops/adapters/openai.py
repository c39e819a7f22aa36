"""OpenAI tool calling (Chat Completions and Responses) through ToolOps.

    tools = openai_tools(client)                 # pass as `tools=` to the model
    ...
    message = completion.choices[0].message
    if message.tool_calls:
        messages.append(message)
        messages += run_tool_calls(run, message.tool_calls, step_index=turn)

The model's tool-call id becomes the call's tool_call_id, and the turn its step_index:
the same turn sent again answers the recorded calls instead of running them twice."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from toolops.client import Run, ToolOps

from . import field, model_text


def openai_tools(client: ToolOps) -> list[dict[str, Any]]:
    """The catalog as Chat Completions function tools."""
    return client.tools(format="openai")


def responses_tools(client: ToolOps) -> list[dict[str, Any]]:
    """The catalog as Responses API function tools (the function's fields at the top)."""
    return [{"type": "function", **tool["function"]} for tool in openai_tools(client)]


def run_tool_calls(
    run: Run, tool_calls: Iterable[Any], *, step_index: int, wait: float = 0
) -> list[dict[str, Any]]:
    """Chat Completions: run the function calls among an assistant message's `tool_calls`;
    the `tool` messages to send back, one per call, in order. Custom tool calls (openai's
    `ChatCompletionMessageCustomToolCall`, no catalog tool) are the agent's to answer.
    `wait` long-polls a call waiting for a person."""
    messages = []
    for tool_call in tool_calls:
        if field(tool_call, "type", "function") != "function":
            continue
        function = field(tool_call, "function")
        call = run.call(
            field(function, "name"),
            field(function, "arguments") or "{}",
            step_index=step_index,
            tool_call_id=field(tool_call, "id"),
            wait=wait,
        )
        messages.append(
            {"role": "tool", "tool_call_id": field(tool_call, "id"), "content": model_text(call)}
        )
    return messages


def run_function_calls(
    run: Run, output: Iterable[Any], *, step_index: int, wait: float = 0
) -> list[dict[str, Any]]:
    """Responses API: run the `function_call` items of a response's output; the
    `function_call_output` items to send back."""
    items = []
    for item in output:
        if field(item, "type") != "function_call":
            continue
        call = run.call(
            field(item, "name"),
            field(item, "arguments") or "{}",
            step_index=step_index,
            tool_call_id=field(item, "call_id"),
            wait=wait,
        )
        items.append(
            {
                "type": "function_call_output",
                "call_id": field(item, "call_id"),
                "output": model_text(call),
            }
        )
    return items
