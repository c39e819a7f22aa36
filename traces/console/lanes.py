"""One call's lane on a run's waterfall (timeline.py): its bar and its attempts' bars, with
the backoff waited before each, its idempotency record, its title and its words, and the
links to the calls it undoes or that undo it, on whichever page shows them."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING

from django.db.models import Prefetch
from django.urls import reverse

from compensations.models import Ticket
from toolops.models import Attempt, IdempotencyRecord, ToolCall
from toolops.tools.facts import title as call_title
from toolops.tools.spec import ToolSpec
from toolops.tools.wording import error_sentence
from traces.sensitive import redact

from .axis import Span, attempt_end, clock, duration, stamp
from .pretty import pretty
from .stopped import OPEN, call_state
from .words import ApprovalLine, approval_line, status_words, why_words

if TYPE_CHECKING:
    from .axis import Axis, FullCall

UNDO_PREFIX = "~undo:"  # an undo call's tool_call_id: "~undo:<undone call_id>:<round>"


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


def call_href(call_id: str, page: int, current: int) -> str:
    return f"#call-{call_id}" if page == current else f"?page={page}#call-{call_id}"


def read_whole(pks: list[int]) -> dict[int, FullCall]:
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


class Lanes:
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
        full: Iterable[FullCall],
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
        href = call_href(c.call_id, self.pages[c.call_id], self.current)
        title = self.titles.get(c.pk) or c.tool
        return CallRef(c.call_id, c.tool_call_id, c.tool, c.status, href, c.step_index, title)

    def lane(self, c: FullCall) -> CallLane:
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


def records_of(calls: Iterable[ToolCall]) -> dict[str, IdempotencyRecord]:
    # One query for every shown call's record. `key` is unique and indexed (call_ref is
    # not); a record belongs to the call its call_ref names (a replay's key is shared).
    keys = {c.idempotency_key for c in calls if c.idempotency_key}
    return {r.call_ref: r for r in IdempotencyRecord.objects.filter(key__in=keys)}


def _undone_call_id(call: ToolCall) -> str:
    if not call.tool_call_id.startswith(UNDO_PREFIX):
        return ""
    return call.tool_call_id[len(UNDO_PREFIX) :].rpartition(":")[0]


def _lane(
    call: FullCall,
    *,
    axis: Axis,
    record: IdempotencyRecord | None,
    tools: dict[str, ToolSpec],
    title: str,
) -> CallLane:
    attempts: list[AttemptLane] = []
    looks = 0
    spec = tools.get(call.tool)
    for attempt in call.attempt_list:
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
