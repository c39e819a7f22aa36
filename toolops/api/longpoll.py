"""Long-polls (`wait=N`) waited on the event loop, not in the API's threads.

A long-poll used to sleep in one of the pool's threads (TOOLOPS_API_THREADS) for up to
30 s: 64 of them from one agent and every other agent's requests queued behind. Now the
view answers at once and marks its response with a LongPoll; the handler
(middleware.ApiASGIHandler) then waits with `asyncio.sleep` and takes a thread only for
each look (one primary-key read, about a millisecond), with growing pauses as before.

A bounded poll rather than a notification: a call ends in many places (the executor, a
worker, a reviewer's decision, the sweeps) and in other processes, and the database is
the one place they all write; the poll's cost is one indexed read per pause. The duplicate
of a call in progress (the follower) waits the same way: its first look, in the view, takes
over a dead holder's claim; a holder that dies during the wait is left to the sweep.
When the process begins to stop, every wait ends at once with the call as it stands
(toolops/stopping.py), so that a long-poll never holds a shutdown for its whole wait.

A token is checked when the request arrives, and a long-poll outlives that check by up to
30 s: revoked or replaced meanwhile (`revoke_agent`, `create_agent --rotate`, in any
process), it must not still be answered with the call. Each look reads the agent's row
with the call's status, in the same statement, and a token that no longer stands ends the
wait with the 401 a new request would get — within one pause, in every process, where the
token cache (auth.py) would take up to AGENT_CACHE_S."""

from __future__ import annotations

import asyncio
import enum
import json
import time
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any

from django.db import close_old_connections, connection
from django.http import HttpRequest, HttpResponseBase
from rest_framework.response import Response

from toolops import executor, stopping
from toolops.models import Agent, Run, ToolCall

from .errors import problem
from .output import call_out

ATTRIBUTE = "toolops_long_poll"
# The request's mark (serve_on_event_loop), an attribute of no HttpRequest's.
ON_EVENT_LOOP = "toolops_event_loop"
REVOKED = (
    "The token is not valid: it was revoked or replaced while this request waited. Ask "
    "for the call again with the agent's current token."
)
GONE = "The call no longer exists: its run was purged while this request waited."
# One primary-key read: the call's status, and whether the token the request came with is
# still its agent's, active (SQLite answers 0 or 1, PostgreSQL a boolean).
LOOK_SQL = (
    f"SELECT c.status, a.is_active AND a.token_hash = %s FROM {ToolCall._meta.db_table} c "
    f"JOIN {Run._meta.db_table} r ON r.id = c.run_id "
    f"JOIN {Agent._meta.db_table} a ON a.id = r.agent_id WHERE c.id = %s"
)


@dataclass
class LongPoll:
    call: ToolCall
    replayed: bool
    deadline: float
    # The digest of the token the request was authenticated with.
    token_hash: str


class Look(enum.Enum):
    WAITING = "waiting"
    ENDED = "ended"
    REVOKED = "revoked"
    GONE = "gone"  # the call's row is no more (its run purged by retention)


def serve_on_event_loop(request: HttpRequest) -> None:
    """Mark `request` as served by a handler that waits long-polls on its event loop."""
    setattr(request, ON_EVENT_LOOP, True)


def served_on_event_loop(request: Any) -> bool:
    """Whether the handler serving `request` waits long-polls on its event loop (else the
    view waits in its thread, as under the test client or WSGI)."""
    return bool(getattr(request, ON_EVENT_LOOP, False))


def hand_over(
    response: Response, *, call: ToolCall, replayed: bool, seconds: float, agent: Agent
) -> Response:
    """Mark the view's answer (the call as it stands) for the handler to wait on. `agent`
    is the request's, found by its token's digest (auth.py): that digest must still be
    the agent's at every look."""
    poll = LongPoll(call, replayed, time.monotonic() + seconds, agent.token_hash)
    setattr(response, ATTRIBUTE, poll)
    return response


async def wait(
    response: HttpResponseBase, *, pool: Executor, disconnected: asyncio.Future[Any]
) -> HttpResponseBase:
    """The response to send: `response` anew once its call stops waiting, at the
    deadline, or at once if the client went away (its answer is then not read)."""
    poll: LongPoll | None = getattr(response, ATTRIBUTE, None)
    if poll is None or not isinstance(response, Response):  # hand_over marks only a view's
        return response
    loop = asyncio.get_running_loop()
    pauses = executor.LONG_POLL_PAUSES
    looks = 0
    # The process stopping (SIGTERM) ends the wait as its deadline would: the call as it
    # stands, still waiting, and the agent asks again — another process, via the balancer.
    stopped = asyncio.ensure_future(stopping.wait())
    look = Look.WAITING
    try:
        while True:
            left = poll.deadline - time.monotonic()
            if left <= 0 or disconnected.done() or stopping.is_stopping():
                break
            pause = min(pauses[min(looks, len(pauses) - 1)], left)
            await asyncio.wait([disconnected, stopped], timeout=pause)
            looks += 1
            if disconnected.done():
                return response
            if stopped.done():
                break
            look = await loop.run_in_executor(pool, look_at, poll.call.pk, poll.token_hash)
            if look is not Look.WAITING:
                break
    finally:
        stopped.cancel()
    if look is Look.WAITING:
        # Ended by the deadline or a stop: the answer, too, goes only to a token that
        # still stands, however recent the last look.
        look = await loop.run_in_executor(pool, look_at, poll.call.pk, poll.token_hash)
    if look is Look.REVOKED:
        return _refused(response, 401, REVOKED)
    if look is Look.GONE:
        return _refused(response, 404, GONE)
    return await loop.run_in_executor(pool, _render, response, poll)


def look_at(call_pk: int, token_hash: str) -> Look:
    """One look at a waiting call (the API's long-polls, MCP's waits for a reviewer):
    still waiting, ended, or asked for with a token that no longer stands."""
    try:
        with connection.cursor() as cursor:
            cursor.execute(LOOK_SQL, [token_hash, call_pk])
            row = cursor.fetchone()
    finally:
        # Each look borrows a database connection and gives it back, as a request does.
        close_old_connections()
    if row is None:
        return Look.GONE
    status, token_stands = row
    if not token_stands:
        return Look.REVOKED
    return Look.WAITING if status in ToolCall.WAITING else Look.ENDED


def _render(response: Response, poll: LongPoll) -> HttpResponseBase:
    """The view's response, its body and status for the call as it is now (headers as
    the middleware set them)."""
    try:
        poll.call.refresh_from_db()  # the looks read only its status
        call = executor.wait_ended(call=poll.call)
        data = call_out(call, replayed=poll.replayed)
    finally:
        close_old_connections()
    response.status_code = 202 if call.is_waiting else 200
    # The view set it on the response, as it set accepted_renderer: the stubs leave it out.
    context = response.renderer_context  # type: ignore[attr-defined]
    content = response.accepted_renderer.render(data, response.accepted_media_type, context)
    return _with_content(response, content)


def _refused(response: Response, status: int, detail: str) -> HttpResponseBase:
    """The view's response turned into the problem the request would get now: 401 for a
    withdrawn token, 404 for a call no more (the headers the middleware set, such as
    nosniff, stay)."""
    response.status_code = status
    response.headers["Content-Type"] = "application/problem+json"
    if status == 401:
        response.headers["WWW-Authenticate"] = "Bearer"
    return _with_content(response, json.dumps(problem(status, detail)).encode())


def _with_content(response: Response, content: bytes | str) -> HttpResponseBase:
    response.content = content
    if response.has_header("Content-Length"):
        response.headers["Content-Length"] = str(len(response.content))  # encoded
    return response
