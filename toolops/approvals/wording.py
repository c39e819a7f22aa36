"""A held call in plain words, for the reviewer who must say yes or no to it: "Charge
199.00 for order ord-9" reads faster, and is misread less, than a JSON object. The args
themselves are always shown next to it; this is a summary, never the record.

Whether a call can be undone is said by the catalog's one wording
(toolops/tools/reversibility.py), here as everywhere else."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Protocol

from toolops.tools.reversibility import approval_consequence, reversibility
from toolops.tools.spec import ToolSpec
from traces.services import redact

# A generic description names this many args, each value cut to VALUE_MAX characters.
GENERIC_ARGS = 3
VALUE_MAX = 40

REASONS = {
    "irreversible": "The tool acts on the outside world at once, so a person approves each call.",
    "policy": "The tool's policy says a person approves each call.",
    "possible_duplicate": (
        "The same call, with the same args, was made in another run of this session: "
        "it may be a repeat."
    ),
}


# A call's status as a reviewer reads it; the stored word stays in the badge's tooltip.
CALL_STATUS_WORDS = {
    "succeeded": "done",
    "degraded": "done in part",
    "failed": "failed",
    "unknown": "outcome unknown",
    "skipped": "skipped",
    "pending_approval": "waiting for approval",
    "rejected": "rejected",
    "in_progress": "in progress",
}


class HasToolAndArgs(Protocol):
    tool: str
    args: Any


def _text(value: Any) -> str:
    if isinstance(value, str):
        text = value.strip()
    else:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return text if len(text) <= VALUE_MAX else f"{text[: VALUE_MAX - 1]}…"


def _charge(args: dict[str, Any]) -> str | None:
    if "amount" not in args:
        return None
    order = f" for order {_text(args['order_id'])}" if "order_id" in args else ""
    return f"Charge {_text(args['amount'])}{order}"


def _create_order(args: dict[str, Any]) -> str | None:
    if "sku" not in args:
        return None
    qty = _text(args.get("qty", 1))
    price = f" at {_text(args['amount'])}" if "amount" in args else ""
    return f"Create an order for {qty} × {_text(args['sku'])}{price}"


def _send_notification(args: dict[str, Any]) -> str | None:
    return f"Send a message to {_text(args['to'])}" if "to" in args else "Send a message"


WORDING: dict[str, Callable[[dict[str, Any]], str | None]] = {
    "charge": _charge,
    "create_order": _create_order,
    "send_notification": _send_notification,
}


def describe(call: HasToolAndArgs, schema: dict[str, Any] | None = None) -> str:
    """What the call does, in one short line; sensitive fields stay redacted (by name, or
    where the tool's `schema` marks them)."""
    args = redact(call.args, schema) if isinstance(call.args, dict) else {}
    words = WORDING.get(call.tool)
    said = words(args) if words is not None else None
    if said:
        return said
    if not args:
        return f"{call.tool} with no args"
    named = [f"{key}={_text(value)}" for key, value in list(args.items())[:GENERIC_ARGS]]
    more = ", …" if len(args) > GENERIC_ARGS else ""
    return f"{call.tool} with {', '.join(named)}{more}"


def undo_tool(spec: ToolSpec | None) -> str:
    """The tool that undoes a call of `spec`, "" when none is declared."""
    return reversibility(spec.name, spec).undo if spec is not None else ""


def reason_text(reason: str, spec: ToolSpec | None = None) -> str:
    """Why the call waits for a person, as a sentence (whether it can be undone is said
    once, by `consequence`)."""
    return REASONS.get(reason, reason)


def reason_label(reason: str, label: str, spec: ToolSpec | None = None) -> str:
    """The reason's badge; for an irreversible tool, whether and how it can be undone in
    the catalog's one wording (tools/reversibility.py)."""
    if reason == "irreversible" and spec is not None:
        return reversibility(spec.name, spec).label
    return label


def consequence(tool: str, spec: ToolSpec | None, *, status: str = "pending") -> str:
    """What Approve does (or, decided, did), and whether an undo exists and which."""
    return approval_consequence(tool, spec, status=status)
