"""MCP's way for the model to read its policy before it plans (API.md "Agent policy"): a
tool, `toolops_policy`, with no arguments, answering the same JSON as `GET /api/v1/policy`.

A tool rather than a resource: a model calls tools on its own, while a resource is read
only when the client application decides to attach it, and this server speaks tools
only. The call is ToolOps answering about itself: not an executor call, so it is neither
recorded in the session's run nor counted by any limit, and every agent may make it."""

from __future__ import annotations

import json
from typing import Any

from toolops.api.policy import agent_policy
from toolops.models import Agent

NAME = "toolops_policy"
DESCRIPTION = (
    "ToolOps' policy for you, before you plan: the tools you may call, and each spend "
    "limit that applies to you with what you have spent, its max and when it resets. "
    "Takes no arguments; calling it changes nothing."
)


class Arguments(ValueError):
    """toolops_policy was sent arguments (answered as invalid params)."""


def tool() -> dict[str, Any]:
    """The tool as tools/list lists it."""
    return {
        "name": NAME,
        "description": DESCRIPTION,
        "input_schema": {"type": "object", "properties": {}, "additionalProperties": False},
        "annotations": {
            "readOnlyHint": True,
            "idempotentHint": True,
            "destructiveHint": False,
            "openWorldHint": False,
        },
    }


def answer(*, agent: Agent, arguments: dict[str, Any] | None) -> tuple[str, dict[str, Any]]:
    """The agent's policy as text (sorted-key JSON, like a tool's result) and as JSON."""
    if arguments:
        names = ", ".join(sorted(map(str, arguments)))[:200]
        raise Arguments(f"{NAME} takes no arguments (got {names})")
    data = agent_policy(agent)
    return json.dumps(data, sort_keys=True), data
