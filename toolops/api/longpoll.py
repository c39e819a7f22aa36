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
(toolops/stopping.py), so that a long-poll never holds a shutdown for its whole wait."""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any

from django.db import close_old_connections
from django.http import HttpResponseBase
from rest_framework.response import Response

from toolops import executor, stopping
from toolops.models import ToolCall

from .output import call_out

ATTRIBUTE = "toolops_long_poll"


@dataclass
class LongPoll:
    call: ToolCall
    replayed: bool
    deadline: float


def served_on_event_loop(request: Any) -> bool:
    """Whether the handler serving `request` waits long-polls on its event loop (else the
    view waits in its thread, as under the test client or WSGI)."""
    return bool(getattr(request, "toolops_event_loop", False))


def hand_over(response: Response, *, call: ToolCall, replayed: bool, seconds: float) -> Response:
    """Mark the view's answer (the call as it stands) for the handler to wait on."""
    setattr(response, ATTRIBUTE, LongPoll(call, replayed, time.monotonic() + seconds))
    return response


async def wait(
    response: HttpResponseBase, *, pool: Executor, disconnected: asyncio.Future[Any]
) -> HttpResponseBase:
    """The response to send: `response` anew once its call stops waiting, at the
    deadline, or at once if the client went away (its answer is then not read)."""
    poll: LongPoll | None = getattr(response, ATTRIBUTE, None)
    if poll is None:
        return response
    loop = asyncio.get_running_loop()
    pauses = executor.LONG_POLL_PAUSES
    looks = 0
    # The process stopping (SIGTERM) ends the wait as its deadline would: the call as it
    # stands, still waiting, and the agent asks again — another process, via the balancer.
    stopped = asyncio.ensure_future(stopping.wait())
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
            if stopped.done() or await loop.run_in_executor(pool, _look, poll.call):
                break
    finally:
        stopped.cancel()
    return await loop.run_in_executor(pool, _render, response, poll)


def _look(call: ToolCall) -> bool:
    try:
        return executor.wait_look(call=call)
    finally:
        # Each look borrows a database connection and gives it back, as a request does.
        close_old_connections()


def _render(response: Response, poll: LongPoll) -> HttpResponseBase:
    """The view's response, its body and status for the call as it is now (headers as
    the middleware set them)."""
    try:
        call = executor.wait_ended(call=poll.call)
        data = call_out(call, replayed=poll.replayed)
    finally:
        close_old_connections()
    response.status_code = 202 if call.is_waiting else 200
    response.content = response.accepted_renderer.render(
        data, response.accepted_media_type, response.renderer_context
    )
    if response.has_header("Content-Length"):
        response.headers["Content-Length"] = str(len(response.content))
    return response
