"""The run page's compensations. A long run may register one for nearly every call, and
the table sits in the live region that is fetched again on every change: so the page lists
only the compensations of the calls it shows (those the calls undo, and those its undo
calls carry out), with the run's totals by status and links to the pages that list the
others. Two queries, whatever the size of the run."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from django.db.models import Q

from compensations.models import Compensation
from toolops.tools import registry
from toolops.tools.wording import error_sentence

from .timeline import Timeline


@dataclass
class CompensationRow:
    """A compensation, with links to the call it undoes and its latest undo call."""

    compensation: Compensation
    call_href: str
    undo_href: str

    @property
    def error(self) -> str:
        """Its last error as a sentence naming the service (toolops/tools/wording.py)."""
        c = self.compensation
        if not c.last_error:
            return c.problem
        return error_sentence(c.last_error, tool=c.tool, spec=registry.get(c.tool))


@dataclass(frozen=True)
class PageRange:
    """Pages `first` to `last` of the run's calls (one page when they are equal)."""

    first: int
    last: int


# A compensation's status, as the page says it to a person ("2 undone").
STATUS_WORDS: dict[str, str] = {
    Compensation.Status.REGISTERED: "to be undone if the run is aborted",
    Compensation.Status.DISCARDED: "not needed (the run completed)",
    Compensation.Status.PENDING: "waiting to be undone",
    Compensation.Status.RUNNING: "being undone",
    Compensation.Status.SUCCEEDED: "undone",
    Compensation.Status.DEAD_LETTERED: "could not be undone (a support ticket is open)",
    Compensation.Status.RESOLVED: "settled by hand by support",
}


@dataclass(frozen=True)
class UndoFacts:
    """One compensation of the run, in the few columns its plain summary needs."""

    call_pk: int  # the call it undoes
    status: str
    tool: str  # the undo tool
    undo_call_pk: int | None  # its latest undo call
    ticket: int | None  # the support ticket opened when it could not be done


@dataclass
class RunCompensations:
    rows: list[CompensationRow]  # the shown calls' compensations, newest first
    total: int  # the run's
    by_status: list[tuple[str, int]]  # the run's, in the order of Compensation.Status
    elsewhere: list[PageRange]  # the other pages that list some
    paged: bool  # the run's calls take more than one page
    undos: list[UndoFacts]  # the run's, newest first: what its summary says was undone

    @property
    def plain(self) -> list[str]:
        """The run's totals in words: ["2 undone", "1 could not be undone (…)"]."""
        return [f"{count} {STATUS_WORDS.get(status, status)}" for status, count in self.by_status]

    @property
    def pages_elsewhere(self) -> int:
        return sum(r.last - r.first + 1 for r in self.elsewhere)


def compensations_build(*, timeline: Timeline) -> RunCompensations:
    """The compensations of the calls on `timeline`'s page, and the run's totals. Each
    lane of the page learns the ticket opened for its undo (its plain words name it)."""
    current = timeline.window.number
    shown = [pk for pk, page in timeline.call_pages.items() if page == current]
    # Small columns of every compensation of the run: its totals and where the others are.
    counts: Counter[str] = Counter()
    pages: set[int] = set()
    # The ticket's id rides along on a join: still one query.
    light = (
        Compensation.objects.filter(run=timeline.run)
        .order_by("-pk")
        .values_list("call_id", "status", "tool", "undo_call_id", "ticket")
    )
    undos = [UndoFacts(*row) for row in light]
    for undo in undos:
        counts[undo.status] += 1
        pages.add(timeline.call_pages.get(undo.call_pk, current))
    # By the shown calls, not by the ids above: the same query on every page, even one
    # with none to show.
    full = (
        Compensation.objects.filter(Q(call_id__in=shown) | Q(undo_call_id__in=shown))
        .select_related("call", "undo_call", "ticket")
        .order_by("-pk")
    )
    rows = [
        CompensationRow(
            c,
            timeline.href(c.call.call_id),
            timeline.href(c.undo_call.call_id) if c.undo_call else "",
        )
        for c in full
    ]
    _tickets_to_lanes(timeline, rows)
    return RunCompensations(
        rows=rows,
        total=sum(counts.values()),
        by_status=[(s.value, counts[s.value]) for s in Compensation.Status if counts[s.value]],
        elsewhere=_ranges(sorted(pages - {current})),
        paged=timeline.window.pages > 1,
        undos=undos,
    )


def _tickets_to_lanes(timeline: Timeline, rows: list[CompensationRow]) -> None:
    """The call an undo failed for, and each round of that undo, name its ticket."""
    tickets = {}
    for row in rows:
        ticket = getattr(row.compensation, "ticket", None)  # none: the relation raises
        if ticket is not None:
            tickets[row.compensation.call.call_id] = ticket
    for lane in timeline.rows:
        undone = lane.undoes.call_id if lane.undoes is not None else lane.call.call_id
        lane.ticket = tickets.get(undone, lane.ticket)


def _ranges(pages: list[int]) -> list[PageRange]:
    """[1, 2, 3, 5] → 1–3, 5: a run of thousands of calls still links in a line."""
    ranges: list[PageRange] = []
    for page in pages:
        if ranges and ranges[-1].last == page - 1:
            ranges[-1] = PageRange(ranges[-1].first, page)
        else:
            ranges.append(PageRange(page, page))
    return ranges
