"""Adapters from the tool-calling formats agents use to ToolOps runs: leaves that speak
only through toolops.client (no Django), and accept the SDKs' objects or plain dicts."""

from __future__ import annotations

import json
from typing import Any

from toolops.client import Call


def field(obj: Any, name: str, default: Any = None) -> Any:
    """`obj[name]` for a dict, `obj.name` for an SDK object."""
    if isinstance(obj, dict):
        return obj.get(name, default)
    return getattr(obj, name, default)


def model_text(call: Call) -> str:
    """What the model is told of a call: its result as JSON when it may be used, else the
    feedback (what happened and what to do next; for a call waiting for a person, that
    it waits). Keys sorted: a replay reads the same as the first answer."""
    if call.ok:
        return json.dumps(call.result, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    return call.feedback or f"{call.tool} {call.status}"
