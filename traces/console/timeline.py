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
from datetime import timedelta

from django.db.models import Prefetch, Q
from django.urls import reverse
from django.utils import timezone

from compensations.models import Ticket
from toolops.idle import idle_text
from toolops.models import Attempt, IdempotencyRecord, Run, ToolCall
from toolops.summary import last_succeeded, run_summary
from toolops.tools.facts import title as call_title
from toolops.tools.spec import ToolSpec
from toolops.tools.wording import error_sentence
from traces.sensitive import redact

from .axis import Axis, Span, attempt_end, clock, duration, run_axis, stamp
from .pretty import pretty
from .stopped import OPEN, BudgetLine, budget_lines, call_state, stopping_call, why_stopped
from .window import PAGE_SIZE, Window
from .words import ApprovalLine, approval_line, status_words, why_words

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
UNDO_PREFIX = "~undo:"  # an undo call's tool_call_id: "~undo:<undone call_id>:<round>"
S = ToolCall.Status


@dataclass(frozen=True)
class CallRef:
    """A link to another call of the run, on whichever page shows it."""

    call_id: str
    tool_call_id: str
    tool: str
    status: str
    href: str
    step: int = 0
    title: str = ""  # the catalog's title when the call is on the page, else the tool

    @property
    def status_words(self) -> str:
        return status_words(self.status)

    @property
    def round(self) -> str:
        """An undo call's round: its try at the undo ("2" once support retried it)."""
        return self.tool_call_id.rpartition(":")[2]


@dataclass
class AttemptLane:
    attempt: Attempt
    anchor: str
    label: str  # "attempt 2", or "reconcile look 1"
    bar: Span
    wait: Span | None  # the backoff slept before it
    # Formatted here, once: a long run's page shows hundreds of them.
    started: str
    took_ms: str
    waited_ms: str
    error_text: str = ""  # its error as a sentence naming the service

    @property
    def is_reconcile(self) -> bool:
        return self.attempt.purpose == "reconcile"


@dataclass(frozen=True)
class RecordFacts:
    """A call's idempotency record, as the page shows it (once per attempt)."""

    key: str
    state: str
    fence: int
    recorded: str
    lease_until: str
    expires: str

    @classmethod
    def of(cls, record: IdempotencyRecord) -> RecordFacts:
        recorded = stamp(record.recorded_at) if record.recorded_at else ""
        return cls(
            record.key,
            record.state,
            record.fence,
            recorded,
            stamp(record.lease_until),
            stamp(record.expires_at),
        )


@dataclass
class CallLane:
    call: ToolCall
    attempts: list[AttemptLane]
    record: RecordFacts | None
    link: str  # the call's deep link, /console/calls/<call_id>/
    created: str
    finished: str
    bar: Span
    state: str  # done · in_flight · pending_approval · waiting_retry · needs_person
    state_text: str
    waiting: Span | None  # waiting for its next retry: from its last attempt to now
    args_json: str
    result_json: str
    is_last_succeeded: bool = False
    is_stop: bool = False
    undoes: CallRef | None = None  # an undo call: the call it undoes
    undone_by: list[CallRef] = field(default_factory=list)
    title: str = ""  # the catalog's one-line title, when the tool has a summary
    error_text: str = ""  # why it failed, in words: a sentence naming the service
    status_words: str = ""  # its status as people read it ("done", "in progress")
    approval: ApprovalLine | None = None  # its approval in words, past tense once decided
    # The ticket opened when undoing it failed (set by compensated.py, which reads them).
    ticket: Ticket | None = None

    @property
    def name(self) -> str:
        """What a person calls it: its title, else its tool."""
        return self.title or self.call.tool

    @property
    def anchor(self) -> str:
        return f"call-{self.call.call_id}"

    @property
    def last_attempt(self) -> AttemptLane | None:
        return self.attempts[-1] if self.attempts else None

    @property
    def round(self) -> str:
        return self.call.tool_call_id.rpartition(":")[2] if self.undoes else ""

    @property
    def took(self) -> str:
        """From the call's creation to its outcome, in words ("2.1 s"); "" while open. The
        list a phone shows instead of the bars says it."""
        if self.call.finished_at is None:
            return ""
        return duration((self.call.finished_at - self.call.created_at).total_seconds() * 1000)


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
        return "" if page is None else _href(call_id, page, self.window.number)


def _href(call_id: str, page: int, current: int) -> str:
    return f"#call-{call_id}" if page == current else f"?page={page}#call-{call_id}"


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
    position = {c.call_id: i for i, c in enumerate(light)}
    anchor = position[stop.call_id] if stop is not None else None
    window = Window.of(total=len(light), page=page, anchor=anchor)
    shown = light[window.first : window.last]
    # The header shows the stopping call's attempts whichever page is open: read with the
    # window, in the same queries.
    full = _read_whole([c.pk for c in shown] + ([stop.pk] if stop is not None else []))
    records = _records(full.values())
    live = run.status in live_statuses
    axis = run_axis(run, light, full.values(), now=now, live=live)

    call_pages = {c.pk: index // PAGE_SIZE + 1 for index, c in enumerate(light)}
    pages = {c.call_id: call_pages[c.pk] for c in light}
    lanes = _Lanes(
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

    rows = [lanes.lane(full[c.pk]) for c in shown if c.pk in full]
    in_window = {row.call.pk: row for row in rows}
    stop_lane = None
    if stop is not None and stop.pk in full:
        stop_lane = in_window.get(stop.pk) or lanes.lane(full[stop.pk])
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


def _read_whole(pks: list[int]) -> dict[int, ToolCall]:
    """The calls shown in full, by pk, with their attempts: two queries, whatever the page."""
    return {
        c.pk: c
        for c in ToolCall.objects.filter(pk__in=pks)
        # The approval's reviewer too: the page says who decided it.
        .select_related("settled_by", "approval__decided_by")
        .prefetch_related(
            # Into a list: `.all()` on a prefetched relation still clones a queryset, which
            # a page of hundreds of calls pays for in milliseconds.
            Prefetch(
                "attempt_rows",
                queryset=Attempt.objects.order_by("started_at", "pk"),
                to_attr="attempt_list",
            )
        )
    }


class _Lanes:
    """Builds a call's lane with what only the whole run knows: whether it is the last
    succeeded or the stopping call, the call an undo call undoes, the undo calls of a
    call, and the page each of those is on (for their links)."""

    def __init__(
        self,
        light: Sequence[ToolCall],
        *,
        axis: Axis,
        records: dict[str, IdempotencyRecord],
        tools: dict[str, ToolSpec],
        last_ok: str | None,
        stop: ToolCall | None,
        pages: dict[str, int],
        current: int,
        full: Iterable[ToolCall],
    ) -> None:
        self.axis, self.records, self.tools = axis, records, tools
        self.last_ok, self.stop = last_ok, stop
        self.pages, self.current = pages, current
        self.by_call_id = {c.call_id: c for c in light}
        # Titles need the args: only the calls read whole have them (the page's).
        self.titles = {c.pk: _title(c, tools.get(c.tool)) for c in full}
        self.undone_by: dict[str, list[ToolCall]] = {}
        for c in light:
            if c.role == ToolCall.Role.UNDO:
                self.undone_by.setdefault(_undone_call_id(c), []).append(c)

    def ref(self, c: ToolCall) -> CallRef:
        href = _href(c.call_id, self.pages[c.call_id], self.current)
        title = self.titles.get(c.pk) or c.tool
        return CallRef(c.call_id, c.tool_call_id, c.tool, c.status, href, c.step_index, title)

    def lane(self, c: ToolCall) -> CallLane:
        record = self.records.get(c.call_id)
        title = self.titles.get(c.pk, "")
        built = _lane(c, axis=self.axis, record=record, tools=self.tools, title=title)
        built.is_last_succeeded = c.role == ToolCall.Role.CALL and c.tool_call_id == self.last_ok
        built.is_stop = self.stop is not None and c.pk == self.stop.pk
        is_undo = c.role == ToolCall.Role.UNDO
        undone = self.by_call_id.get(_undone_call_id(c)) if is_undo else None
        built.undoes = self.ref(undone) if undone is not None else None
        built.undone_by = [self.ref(u) for u in self.undone_by.get(c.call_id, [])]
        return built


def _records(calls: Iterable[ToolCall]) -> dict[str, IdempotencyRecord]:
    # One query for every shown call's record. `key` is unique and indexed (call_ref is
    # not); a record belongs to the call its call_ref names (a replay's key is shared).
    keys = {c.idempotency_key for c in calls if c.idempotency_key}
    return {r.call_ref: r for r in IdempotencyRecord.objects.filter(key__in=keys)}


def _undone_call_id(call: ToolCall) -> str:
    if not call.tool_call_id.startswith(UNDO_PREFIX):
        return ""
    return call.tool_call_id[len(UNDO_PREFIX) :].rpartition(":")[0]


def _lane(
    call: ToolCall,
    *,
    axis: Axis,
    record: IdempotencyRecord | None,
    tools: dict[str, ToolSpec],
    title: str,
) -> CallLane:
    attempts: list[AttemptLane] = []
    looks = 0
    spec = tools.get(call.tool)
    for attempt in call.attempt_list:  # type: ignore[attr-defined]
        begin = attempt.started_at
        if attempt.purpose == "reconcile":
            # A look numbers itself after the attempt it follows: not a unique number.
            looks += 1
            key, label = f"r{looks}", f"reconcile look {looks}"
        else:
            key, label = str(attempt.number), f"attempt {attempt.number}"
        waited = timedelta(milliseconds=attempt.waited_ms)
        row = AttemptLane(
            attempt=attempt,
            anchor=f"attempt-{call.call_id}-{key}",
            label=label,
            bar=axis.span(begin, attempt_end(attempt)),
            wait=axis.span(begin - waited, begin) if attempt.waited_ms > 0 else None,
            started=clock(begin),
            took_ms=f"{attempt.duration_ms:.1f}",
            waited_ms=f"{attempt.waited_ms:.1f}" if attempt.waited_ms > 0 else "",
            error_text=error_sentence(attempt.error, tool=call.tool, spec=spec),
        )
        attempts.append(row)
    last_end = attempt_end(attempts[-1].attempt) if attempts else call.created_at
    state, text = call_state(call)
    end = call.finished_at or (axis.end if call.status in OPEN else max(last_end, call.created_at))
    # Stored redacted already; redacted again for showing, by the tool's own rules, in case
    # a row predates them.
    return CallLane(
        call=call,
        attempts=attempts,
        record=RecordFacts.of(record) if record else None,
        link=reverse("console:call", args=[call.call_id]),
        created=clock(call.created_at),
        finished=clock(call.finished_at) if call.finished_at else "",
        bar=axis.span(call.created_at, end),
        state=state,
        state_text=text,
        waiting=axis.span(last_end, axis.end) if state == "waiting_retry" else None,
        args_json=pretty(redact(call.args, spec=spec)),
        result_json=pretty(redact(call.result, spec=spec, result=True)),
        title=title,
        status_words=status_words(call.status),
        error_text=why_words(call, spec),
        approval=approval_line(call.approval, tool=call.tool, spec=spec) if call.approval else None,
    )


def _title(call: ToolCall, spec: ToolSpec | None) -> str:
    """The catalog's title of a call read whole; "" when its tool has no summary."""
    return call_title(spec, call.args, call.result) if spec and spec.summary else ""


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
