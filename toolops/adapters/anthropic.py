"""Anthropic Messages tool use through ToolOps.

    tools = anthropic_tools(client)              # pass as `tools=` to messages.create
    ...
    if response.stop_reason == "tool_use":
        messages.append({"role": "assistant", "content": response.content})
        messages.append(tool_results_message(run, response.content, step_index=turn))

The `tool_use` block's id becomes the call's tool_call_id, and the turn its step_index:
the same turn sent again answers the recorded calls instead of running them twice."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from toolops.client import Run, ToolOps

from . import field, model_text


def anthropic_tools(client: ToolOps) -> list[dict[str, Any]]:
    """The catalog as Messages API tools (`name`, `description`, `input_schema`)."""
    return client.tools(format="anthropic")


def run_tool_uses(
    run: Run, content: Iterable[Any], *, step_index: int, wait: float = 0
) -> list[dict[str, Any]]:
    """Run the `tool_use` blocks of an assistant message; the `tool_result` blocks to send
    back, `is_error` set when the call may not be used (its feedback is the content)."""
    results = []
    for block in content:
        if field(block, "type") != "tool_use":
            continue
        call = run.call(
            field(block, "name"),
            dict(field(block, "input") or {}),
            step_index=step_index,
            tool_call_id=field(block, "id"),
            wait=wait,
        )
        result: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": field(block, "id"),
            "content": model_text(call),
        }
        if not call.ok:
            result["is_error"] = True
        results.append(result)
    return results


def tool_results_message(
    run: Run, content: Iterable[Any], *, step_index: int, wait: float = 0
) -> dict[str, Any]:
    """The user message that answers an assistant message's tool use."""
    return {
        "role": "user",
        "content": run_tool_uses(run, content, step_index=step_index, wait=wait),
    }
