"""What an MCP request does in ToolOps (sync, Django): list the agent's tools, and run a
`tools/call` as an executor call — the same service the REST API's calls go through."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.http import Http404
from rest_framework.exceptions import APIException

from toolops import executor, jsonbound, selectors, services
from toolops.api.output import call_out
from toolops.api.policy import agent_tools
from toolops.client.calls import result_text
from toolops.models import Agent, Run, ToolCall
from toolops.tools.catalog import NAME_RE
from toolops.tools.spec import ToolSpec

from . import policy

log = logging.getLogger(__name__)

RUN_KEY = "toolops/run_id"
WAITING = ("pending_approval", "in_progress")
STEP_KEY = "toolops/step_index"


class BadMeta(ValueError):
    """`_meta` names a run or step ToolOps cannot use, or the tool's name or arguments are
    past API.md's rules (answered as invalid params, before anything is written); the
    message says which and why."""


@dataclass
class Outcome:
    """A tools/call answer: the text the model reads, the JSON result, and whether it is
    an error (the call failed, was refused, or still waits for a reviewer)."""

    text: str
    structured: dict[str, Any] | None
    is_error: bool
    # A call still waiting for a reviewer, with `wait` 0: the server waits for it on its
    # event loop (server.py), then answers with outcome_after_wait.
    waiting: tuple[ToolCall, bool] | None = None


def tool_list(*, agent: Agent) -> list[dict[str, Any]]:
    """The catalog's non-internal tools the agent may call (API.md "Agent policy"), after
    `toolops_policy` (policy.py): name, description, params schema, and hints from the
    tool's kind (a read changes nothing; an idempotent write may be repeated)."""
    catalog = [
        {
            "name": t.name,
            "description": t.description,
            "input_schema": t.params_schema,
            "annotations": _hints(t),
        }
        for t in agent_tools(agent)
        if t.name != policy.NAME  # ToolOps' own answers by that name (server.py)
    ]
    return [policy.tool(), *catalog]


def _hints(spec: ToolSpec) -> dict[str, bool]:
    return {
        "readOnlyHint": spec.is_read,
        "idempotentHint": spec.kind in ("read", "idempotent_write"),
        "destructiveHint": spec.kind == "irreversible",
        "openWorldHint": True,
    }


def session_run_id(session_id: str) -> str:
    return f"mcp-{session_id}"


def call(
    *,
    agent: Agent,
    session_id: str | None,
    tool: str,
    arguments: dict[str, Any] | None,
    meta: dict[str, Any],
    traceparent: str,
    wait: float | None = None,
) -> Outcome:
    """One tools/call: in the run `_meta` names, else the session's own run, at the step
    `_meta` names, else 0 — so the same write with the same args, sent again by a client
    that retries without ids, is the same call (answered from the record, never sent
    twice). A call that waits for a reviewer is waited for up to `wait` (default
    TOOLOPS_MCP_WAIT_S); the server passes 0 and waits on its event loop instead."""
    _check_params(tool, arguments, meta)
    run_id, step_index = _placement(meta, session_id)
    request = executor.CallRequest(
        step_index=step_index,
        tool=tool,
        args=arguments or {},
        traceparent=traceparent,
        wait=float(settings.TOOLOPS_MCP_WAIT_S if wait is None else wait),
    )
    try:
        try:
            answer = services.call_create(agent=agent, run_id=run_id, request=request)
        except Http404:
            # The run's first call makes it, in the agent's trace when it sent one.
            services.run_create(
                agent=agent,
                run_id=run_id,
                trace_id=_trace_id(traceparent),
                session_key=None,
                budget=None,
                metadata={"source": "mcp"},
            )
            answer = services.call_create(agent=agent, run_id=run_id, request=request)
    except APIException as exc:
        return Outcome(f"ToolOps refused the call: {_detail(exc)}", None, True)
    outcome = outcome_of(call_out(answer.call, replayed=answer.replayed))
    if answer.call.is_waiting and not request.wait:
        outcome.waiting = (answer.call, answer.replayed)
    return outcome


def outcome_after_wait(*, call: ToolCall, replayed: bool) -> Outcome:
    call.refresh_from_db()  # the wait's looks read only its status
    return outcome_of(call_out(executor.wait_ended(call=call), replayed=replayed))


def outcome_of(out: dict[str, Any]) -> Outcome:
    """The model's view of a call object: the result when it may be used, else the
    feedback; a call still waiting says so and that asking again is safe."""
    status = out["status"]
    if status in ("succeeded", "degraded"):
        result = out.get("result")
        text = result_text(result)
        structured = result if isinstance(result, dict) else {"result": result}
        return Outcome(text, structured, False)
    if status in WAITING:
        waiting = (
            "waits for a reviewer to approve it in the ToolOps console"
            if status == "pending_approval"
            else "is still in progress"
        )
        text = (
            f"{out['tool']} {waiting}; nothing more was done. Call it again with the same "
            "arguments (and the same _meta) to get its outcome: it is the same call, and "
            "it will not run twice."
        )
        return Outcome(text, None, True)
    return Outcome(out.get("feedback") or f"{out['tool']} {status}", None, True)


def _check_params(tool: str, arguments: dict[str, Any] | None, meta: dict[str, Any]) -> None:
    """The SDK parsed the JSON-RPC body (pydantic's parser: nesting up to 200 deep, NaN and
    Infinity taken): hold what it made to the API's bounds, and the name to the tool rule."""
    if not isinstance(tool, str) or NAME_RE.match(tool) is None:
        raise BadMeta(f"the tool name must be 1-64 letters, digits, _ or - (got {tool[:40]!r})")
    try:
        jsonbound.check(arguments, what="arguments")
        jsonbound.check(meta, what="_meta")
    except jsonbound.JSONBoundError as exc:
        raise BadMeta(str(exc)) from None


def _placement(meta: dict[str, Any], session_id: str | None) -> tuple[str, int]:
    run_id = meta.get(RUN_KEY)
    if run_id is None:
        if not session_id:
            raise BadMeta(f"name the run in _meta[{RUN_KEY!r}]: this connection has no session")
        run_id = session_run_id(session_id)
    if not isinstance(run_id, str):
        raise BadMeta(f"_meta[{RUN_KEY!r}] must be a string")
    try:
        selectors.check_id(run_id, "run")
    except Http404:
        raise BadMeta(
            f"_meta[{RUN_KEY!r}] must be 1-128 letters, digits or . _ : - (got {run_id[:40]!r})"
        ) from None
    step = meta.get(STEP_KEY, 0)
    if isinstance(step, bool) or not isinstance(step, int) or not 0 <= step < 2**31:
        raise BadMeta(f"_meta[{STEP_KEY!r}] must be an integer from 0 to 2147483647")
    return run_id, step


def _trace_id(traceparent: str) -> str | None:
    """The agent's trace id, so that a run made here joins the agent's trace."""
    parts = traceparent.split("-")
    if len(parts) == 4 and len(parts[1]) == 32 and parts[1] != "0" * 32:
        try:
            int(parts[1], 16)
        except ValueError:
            return None
        return parts[1].lower()
    return None


def _detail(exc: APIException) -> str:
    detail = exc.detail
    if isinstance(detail, dict):
        return "; ".join(
            f"{k}: {' '.join(map(str, v)) if isinstance(v, list) else v}" for k, v in detail.items()
        )
    if isinstance(detail, list):
        return " ".join(map(str, detail))
    return str(detail)


def session_ended(*, agent: Agent, session_id: str) -> None:
    """A session that ends (closed by its client, or idle) completes its run, so the run's
    registered undos are discarded and retention can purge it in time. A run that cannot
    end yet (a call still waits for a reviewer) stays open for the console."""
    run = Run.objects.filter(agent=agent, run_id=session_run_id(session_id)).first()
    if run is None or run.status != Run.Status.RUNNING:
        return
    if run.calls.filter(status__in=WAITING).exists():
        log.info("MCP session run %s left open: a call still waits", run.run_id)
        return
    try:
        services.run_complete(run=run)
    except (services.RunEndingConflict, APIException) as exc:
        log.info("MCP session run %s left open: %s", run.run_id, exc)
