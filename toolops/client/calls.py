"""What both clients share: the call object, the typed errors, the request bodies."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

JSON = dict[str, Any]
WAITING = ("pending_approval", "in_progress")
USABLE = ("succeeded", "degraded")
TRIES = 3
RETRY_STATUSES = (502, 503, 504)
LONG_POLL_MAX_S = 30.0  # API.md: ?wait=N with N ≤ 30
# API.md's rules, matched whole (fullmatch): an id is never trimmed, and "$" in a regex
# would also take a trailing newline. This package imports no other ToolOps module.
ID_RE = re.compile(r"[A-Za-z0-9._:-]{1,128}")
NAME_RE = re.compile(r"[a-zA-Z0-9_-]{1,64}")


class InvalidId(ValueError):
    """An id or a tool name the API would refuse, found before anything is sent: an id
    also becomes part of a URL path, where "/" or "?" would name another resource."""


def check_id(value: Any, what: str) -> str:
    if not isinstance(value, str) or ID_RE.fullmatch(value) is None:
        raise InvalidId(
            f"{what} must be 1-128 characters from [A-Za-z0-9._:-], "
            f"exactly as sent (got {value!r:.60})"
        )
    return value


def check_name(value: Any) -> str:
    if not isinstance(value, str) or NAME_RE.fullmatch(value) is None:
        raise InvalidId(
            f"a tool name must be 1-64 characters from [a-zA-Z0-9_-] (got {value!r:.60})"
        )
    return value


def result_text(result: Any) -> str:
    """A usable result as the model reads it: JSON with sorted keys, so a replay reads
    the same as the first answer."""
    return json.dumps(result, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def client_options(url: str, token: str, timeout_s: float) -> dict[str, Any]:
    """What the sync and the async httpx clients are made with."""
    return {
        "base_url": url.rstrip("/") + "/api/v1",
        "headers": {"Authorization": f"Bearer {token}"},
        # Long-polls hold the response up to 30 s: the read timeout outlasts them.
        "timeout": httpx.Timeout(timeout_s, read=max(timeout_s, LONG_POLL_MAX_S + 10)),
    }


class ToolOpsError(Exception):
    """The API refused the request (4xx/5xx): its problem body's `detail`, and more."""

    def __init__(self, status: int, detail: str, body: Any = None) -> None:
        super().__init__(f"{status}: {detail}")
        self.status = status
        self.detail = detail
        self.body = body


class Unauthorized(ToolOpsError):
    """401: a missing or wrong token."""


class NotFound(ToolOpsError):
    """404: no such run or call for this agent."""


class Conflict(ToolOpsError):
    """409: e.g. a tool_call_id already used for another call, or a run that has ended."""


class BadRequest(ToolOpsError):
    """400/413/422: the request itself is wrong (not the tool: that is a call's status)."""


class ServerError(ToolOpsError):
    """5xx after the tries that were safe to make."""


def _error(response: httpx.Response) -> ToolOpsError:
    try:
        body = response.json()
    except ValueError:
        body = None
    detail = body.get("detail") if isinstance(body, dict) else None
    detail = str(detail or response.text or response.reason_phrase)[:1000]
    kind = {401: Unauthorized, 404: NotFound, 409: Conflict}.get(response.status_code)
    if kind is None:
        kind = ServerError if response.status_code >= 500 else BadRequest
    return kind(response.status_code, detail, body)


@dataclass
class Call:
    """A call object (API.md "Calls"); `raw` is the whole answer."""

    raw: JSON

    call_id: str = field(init=False)
    tool_call_id: str = field(init=False)
    tool: str = field(init=False)
    status: str = field(init=False)

    def __post_init__(self) -> None:
        self.call_id = self.raw["call_id"]
        self.tool_call_id = self.raw["tool_call_id"]
        self.tool = self.raw["tool"]
        self.status = self.raw["status"]

    @property
    def ok(self) -> bool:
        """Succeeded or degraded: its result may be used."""
        return self.status in USABLE

    @property
    def waiting(self) -> bool:
        """Pending approval or still in progress."""
        return self.status in WAITING

    @property
    def result(self) -> Any:
        return self.raw.get("result")

    @property
    def feedback(self) -> str:
        """What to tell the model (API.md): what happened and what to do next."""
        return str(self.raw.get("feedback") or "")

    @property
    def replayed(self) -> bool:
        return bool(self.raw.get("replayed"))

    @property
    def error(self) -> JSON | None:
        return self.raw.get("error")

    @property
    def approval(self) -> JSON | None:
        return self.raw.get("approval")


def _call_body(
    tool: str,
    args: Mapping[str, Any] | str,
    step_index: int,
    tool_call_id: str | None,
    depends_on: list[str] | None,
    tokens: int,
    wait: float,
) -> JSON:
    body: JSON = {
        "step_index": step_index,
        "tool": check_name(tool),
        "args": args if isinstance(args, str) else dict(args),
        # Made here, before the first try, so that a retry is the same request.
        "tool_call_id": (
            f"tc-{uuid.uuid4().hex[:20]}"
            if tool_call_id is None
            else check_id(tool_call_id, "tool_call_id")
        ),
    }
    if depends_on:
        body["depends_on"] = [check_id(i, "depends_on") for i in depends_on]
    if tokens:
        body["tokens"] = tokens
    if wait:
        body["wait"] = min(wait, LONG_POLL_MAX_S)
    return body


def _run_body(
    *,
    run_id: str | None = None,
    session_key: str | None = None,
    budget: Mapping[str, Any] | None = None,
    metadata: Mapping[str, Any] | None = None,
    trace_id: str | None = None,
) -> JSON:
    body: JSON = {
        "run_id": f"r-{uuid.uuid4().hex[:20]}" if run_id is None else check_id(run_id, "run_id")
    }
    if session_key is not None:
        check_id(session_key, "session_key")
    for name, value in (
        ("session_key", session_key),
        ("budget", budget),
        ("metadata", metadata),
        ("trace_id", trace_id),
    ):
        if value is not None:
            body[name] = dict(value) if isinstance(value, Mapping) else value
    return body


def _abort_reason(exc: BaseException) -> str:
    return (f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)[:500]


def _delay(attempt: int) -> float:
    return 0.2 * 2**attempt
