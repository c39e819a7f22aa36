"""What a call asks for, before any database work (DESIGN.md: tool lookup → args schema →
idempotency key): the tool, the args as sent (made to fit the schema), their canonical
form and digest, the schema's verdict, and the idempotency key. All of it is made before
the run is read, so that one query (context.py) can also find a replay."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from toolops.models import ToolCall
from toolops.tools import registry
from toolops.tools.spec import ToolSpec

from . import sizes
from .canonical import ArgsError, canonical_json, digest, normalize, parse_args
from .keys import idempotency_key
from .schemas import schema_errors, where


@dataclass
class CallRequest:
    step_index: int
    tool: str
    args: Any
    tool_call_id: str | None = None
    depends_on: list[str] = field(default_factory=list)
    tokens: int = 0
    wait: float = 0.0
    # The agent's W3C `traceparent` header, if its request carried one.
    traceparent: str = ""


@dataclass
class CallAnswer:
    """What a call request is answered with: the call, and whether it was an earlier
    one's answer (`replayed`, API.md)."""

    call: ToolCall
    replayed: bool


@dataclass
class Prepared:
    spec: ToolSpec | None
    args: dict[str, Any] | None
    digest: str
    canonical: bytes | None
    problem: str | None  # invalid args, for the model
    # sha256(run : step_index : tool : canonical_args); None for an unknown tool or args
    # the schema refuses. Reads carry one too (API.md: Idempotency-Key is always sent).
    key: str | None = None

    @property
    def write_key(self) -> str | None:
        """The key of a write that will be claimed; None for anything else."""
        return self.key if self.spec is not None and not self.spec.is_read else None


def prepare(request: CallRequest, *, agent_id: int, run_id: str) -> Prepared:
    """The request's tool, args (as sent, made to fit the schema), canonical form and key.
    Needs no database, so the key is made before the run is read.

    The run is named by its agent and run_id in the key: two agents may both call a run
    `r-1`, and must never share keys."""
    spec = registry.get(request.tool, include_internal=False)
    try:
        raw = parse_args(request.args)
    except ArgsError as exc:
        text = request.args if isinstance(request.args, str) else repr(request.args)
        return Prepared(spec, None, digest(text.encode()), None, exc.message)
    schema = spec.params_schema if spec else None
    wide = sizes.too_wide(raw, schema) if schema is not None else None
    if wide is not None:  # before the work that grows with the args' width
        return Prepared(spec, None, digest(repr(raw).encode()), None, wide)
    # The tool receives the args as sent (made to fit the schema); the key is made from
    # their canonical form, so model jitter does not change it.
    args = normalize(raw, schema, canonical=False)
    try:
        canonical = canonical_json(normalize(raw, schema))
    except ArgsError as exc:
        return Prepared(spec, args, digest(repr(args).encode()), None, exc.message)
    problem = schema_problem(spec, args) if spec else None
    key = None
    if spec is not None and problem is None:
        key = idempotency_key(
            run_id=f"{agent_id}/{run_id}",
            step_index=request.step_index,
            tool=spec.name,
            canonical_args=canonical,
        )
    return Prepared(spec, args, digest(canonical), canonical, problem, key)


def schema_problem(spec: ToolSpec, args: dict[str, Any]) -> str | None:
    # The error nearest the root first: the model fixes the outermost problem first.
    errors = sorted(schema_errors(spec.params_schema, args), key=lambda e: list(e.absolute_path))
    if not errors:
        return None
    first = errors[0]
    message, path = first.message, where(first)
    if first.validator in ("required", "additionalProperties"):
        return message  # "'qty' is a required property" names the field already
    return f"field {path!r}: {message}" if path else message
