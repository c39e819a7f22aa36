"""A run's page as a waterfall (DESIGN.md "Tracing"): its calls — the agent's, and the
worker's undo calls — as bars on the run's time axis, each call's attempts as child bars
with the backoff waited before each, its idempotency record, and where the run stopped.

A run may have thousands of calls, so the page shows a window of PAGE_SIZE of them. Every
call of the run is read once with a few small columns (what the summary, the stop point,
the paging and the undo links need); only the window's calls are read whole, with their
attempts and records. The number of queries does not grow with the run."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from django.db.models import Q
from django.urls import reverse
from django.utils import timezone

from toolops.idle import idle_text
from toolops.models import Run, ToolCall
from toolops.summary import last_succeeded, run_summary
from toolops.tools.spec import ToolSpec

from .axis import Axis, run_axis
from .lanes import CallLane, CallRef, Lanes, call_href, read_whole, records_of
from .stopped import BudgetLine, budget_lines, stopping_call, why_stopped
from .window import PAGE_SIZE, Window

if TYPE_CHECKING:
    from .axis import FullCall

# The whole run is read with these columns only: args and results can be large.
LIGHT_FIELDS = (
    "run",
    "call_id",
    "tool_call_id",
    "step_index",
    "tool",
    "status",
    "error_reason",
    "role",
    "attempts",
    "tokens",
    "created_at",
    "finished_at",
)


@dataclass
class Timeline:
    run: Run
    rows: list[CallLane]
    window: Window
    axis: Axis
    summary: str
    last_succeeded: CallRef | None
    stop: CallLane | None
    why: str
    budget: list[BudgetLine]
    live: bool
    stop_page: int | None
    pages: dict[str, int]  # call_id → the page that shows it
    call_pages: dict[int, int]  # the same, by the call's pk
    idle: str = ""  # "no call for 12 min": a running run its agent may have left
    agent_calls: list[ToolCall] = field(default_factory=list)  # the agent's, not the undos

    @property
    def stop_href(self) -> str:
        return self.href(self.stop.call.call_id) if self.stop is not None else ""

    @property
    def stop_attempt_href(self) -> str:
        """The stopping call's last attempt: the next thing an operator looks at."""
        last = self.stop.last_attempt if self.stop is not None else None
        if last is None:
            return ""
        return self.stop_href.rpartition("#")[0] + "#" + last.anchor

    def href(self, call_id: str) -> str:
        """A link to a call of this run from this page ("" when it is not one)."""
        page = self.pages.get(call_id)
        return "" if page is None else call_href(call_id, page, self.window.number)


def timeline_build(
    *,
    run: Run,
    page: int | None = None,
    tools: dict[str, ToolSpec] | None = None,
    live_statuses: Iterable[str] = (Run.Status.RUNNING, Run.Status.ABORTING),
) -> Timeline:
    """The waterfall of page `page` of `run` (None: the page where the run stopped).
    `tools` gives the args' schemas for redaction (sensitive fields shown redacted)."""
    now = timezone.now()
    light = list(run.calls.only(*LIGHT_FIELDS).order_by("created_at", "pk"))
    agent = [c for c in light if c.role == ToolCall.Role.CALL]
    last_ok = last_succeeded(agent)
    stop = stopping_call(agent, last_ok)
    window = _window(light, stop, page)
    shown = light[window.first : window.last]
    # The header shows the stopping call's attempts whichever page is open: read with the
    # window, in the same queries.
    full = read_whole([c.pk for c in shown] + ([stop.pk] if stop is not None else []))
    records = records_of(full.values())
    live = run.status in live_statuses
    axis = run_axis(run, light, full.values(), now=now, live=live)

    call_pages = {c.pk: index // PAGE_SIZE + 1 for index, c in enumerate(light)}
    pages = {c.call_id: call_pages[c.pk] for c in light}
    lanes = Lanes(
        light,
        axis=axis,
        records=records,
        tools=tools or {},
        last_ok=last_ok,
        stop=stop,
        pages=pages,
        current=window.number,
        full=full.values(),
    )

    rows, stop_lane = _rows(lanes, shown, full, stop)
    last_ok_call = next((c for c in agent if c.tool_call_id == last_ok), None)
    return Timeline(
        run=run,
        rows=rows,
        window=window,
        axis=axis,
        summary=run_summary(agent),
        last_succeeded=lanes.ref(last_ok_call) if last_ok_call is not None else None,
        stop=stop_lane,
        why=why_stopped(run, full.get(stop.pk) if stop else None),
        budget=budget_lines(run, agent),
        live=live,
        stop_page=pages[stop.call_id] if stop is not None else None,
        pages=pages,
        call_pages=call_pages,
        idle=idle_text(run=run, calls=agent, now=now),
        agent_calls=list(agent),
    )


def _window(light: Sequence[ToolCall], stop: ToolCall | None, page: int | None) -> Window:
    """Page `page` of the run's calls; None: the page that shows the stopping call."""
    position = {c.call_id: i for i, c in enumerate(light)}
    anchor = position[stop.call_id] if stop is not None else None
    return Window.of(total=len(light), page=page, anchor=anchor)


def _rows(
    lanes: Lanes, shown: Sequence[ToolCall], full: dict[int, FullCall], stop: ToolCall | None
) -> tuple[list[CallLane], CallLane | None]:
    """The lanes of the window's calls, and the stopping call's (one of them, or built
    on its own when it is on another page)."""
    rows = [lanes.lane(full[c.pk]) for c in shown if c.pk in full]
    in_window = {row.call.pk: row for row in rows}
    stop_lane = None
    if stop is not None and stop.pk in full:
        stop_lane = in_window.get(stop.pk) or lanes.lane(full[stop.pk])
    return rows, stop_lane


def call_page_url(call: ToolCall) -> str:
    """The run page at `call`'s anchor, on the page that shows it (two COUNTs)."""
    calls = ToolCall.objects.filter(run_id=call.run_id)
    before = calls.filter(
        Q(created_at__lt=call.created_at) | Q(created_at=call.created_at, pk__lt=call.pk)
    ).count()
    url = reverse("console:run-detail", args=[call.run_id])
    if calls.count() > PAGE_SIZE:
        url += f"?page={before // PAGE_SIZE + 1}"
    return f"{url}#call-{call.call_id}"
