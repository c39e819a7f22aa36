"""Adapters from the tool-calling formats agents use to ToolOps runs: leaves that speak
only through toolops.client (no Django), and accept the SDKs' objects or plain dicts."""

from __future__ import annotations

from typing import Any

from toolops.client import Call
from toolops.client.calls import result_text


def field(obj: Any, name: str, default: Any = None) -> Any:
    """`obj[name]` for a dict, `obj.name` for an SDK object."""
    if isinstance(obj, dict):
        return obj.get(name, default)
    return getattr(obj, name, default)


WHY_HELD = {
    "irreversible": "it cannot be undone",
    "policy": "policy requires a person to approve it",
    "possible_duplicate": "it repeats a call made in another run of this conversation",
}


def model_text(call: Call) -> str:
    """What the model is told of a call: its result as JSON when it may be used, else the
    feedback (what happened and what to do next). Keys sorted: a replay reads the same as
    the first answer. A call waiting for a person is told in the model's terms: the API's
    feedback for it speaks to the agent's code (how to poll it)."""
    if call.ok:
        return result_text(call.result)
    if call.status == "pending_approval":
        why = WHY_HELD.get((call.approval or {}).get("reason", ""), "it needs a person's approval")
        return (
            f"{call.tool} is waiting for a reviewer because {why}; nothing was sent. Do not "
            "ask for it again or work around it: its outcome follows once a person decides."
        )
    return call.feedback or f"{call.tool} {call.status}"
