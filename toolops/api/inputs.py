"""The call body's fast check: a plain function that accepts what is plainly valid.

DRF's serializer builds and deep-copies its fields for every request (~0.2 ms, as much as
a third of what ToolOps adds to a replay). A call body that is plainly valid — the types
API.md names, in range, ids and names of the right shape — is taken here as the
serializer would take it; anything else, however slightly off, goes to the serializer,
whose errors are the API's. So the fast check can only ever be stricter than the
serializer, never more lenient, and tests hold the two to the same answers.

`args` sent as a string is parsed here, once, within toolops.jsonbound's bounds: past them
the body is a 400 naming the bound, as if the args had been sent as an object."""

from __future__ import annotations

from typing import Any

from toolops import jsonbound
from toolops.selectors import ID_RE
from toolops.tools.catalog import NAME_RE

from .bounds import STEP_INDEX_MAX, TOKENS_MAX, WAIT_MAX

DEPENDS_MAX = 100


def _id(value: Any) -> bool:
    return type(value) is str and ID_RE.match(value) is not None


def args_text(text: str) -> dict[str, Any] | str:
    """`args` sent as a string: the object it holds. Raises jsonbound.JSONBoundError past
    the bounds. A string that holds no JSON object is returned as it is: the executor
    refuses it as invalid_args, which the model is told (API.md)."""
    try:
        value = jsonbound.loads(text)
    except jsonbound.JSONBoundError:
        raise
    except ValueError:
        return text
    return value if type(value) is dict else text


def call_input(data: Any) -> dict[str, Any] | None:
    """The validated call body, or None: let the serializer judge (and word) it."""
    if type(data) is not dict:
        return None
    step, tool, args = data.get("step_index"), data.get("tool"), data.get("args")
    # `type(…) is int`: a bool is an int to isinstance, and never a number here.
    if type(step) is not int or not 0 <= step <= STEP_INDEX_MAX:
        return None
    if type(tool) is not str or NAME_RE.match(tool) is None:
        return None
    if type(args) is str:
        try:
            args = args_text(args)
        except jsonbound.JSONBoundError:
            return None  # the serializer's ArgsField words the 400
    elif type(args) is not dict:
        return None
    out: dict[str, Any] = {"step_index": step, "tool": tool, "args": args}
    if "tool_call_id" in data:
        if not _id(data["tool_call_id"]):
            return None
        out["tool_call_id"] = data["tool_call_id"]
    if "depends_on" in data:
        ids = data["depends_on"]
        if type(ids) is not list or len(ids) > DEPENDS_MAX or not all(map(_id, ids)):
            return None
        out["depends_on"] = list(ids)
    tokens = data.get("tokens", 0)
    if type(tokens) is not int or not 0 <= tokens <= TOKENS_MAX:
        return None
    out["tokens"] = tokens
    wait = data.get("wait", 0)
    # The range alone: NaN and the infinities fail it, and a 400-digit integer compares
    # with 30.0 where math.isfinite() would raise OverflowError on it.
    if type(wait) not in (int, float) or not 0 <= wait <= WAIT_MAX:
        return None
    out["wait"] = float(wait)
    return out
