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
from toolops.summary import ABORT_STATES, abort_text
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


@dataclass
class RunCompensations:
    rows: list[CompensationRow]  # the shown calls' compensations, newest first
    total: int  # the run's
    by_status: list[tuple[str, int]]  # the run's, in the order of Compensation.Status
    elsewhere: list[PageRange]  # the other pages that list some
    paged: bool  # the run's calls take more than one page
    # An aborted run's first sentence: that it was aborted, and what was undone or not.
    aborted: str = ""

    @property
    def pages_elsewhere(self) -> int:
        return sum(r.last - r.first + 1 for r in self.elsewhere)


def compensations_build(*, timeline: Timeline) -> RunCompensations:
    """The compensations of the calls on `timeline`'s page, and the run's totals."""
    current = timeline.window.number
    shown = [pk for pk, page in timeline.call_pages.items() if page == current]
    # Small columns of every compensation of the run: its totals and where the others are.
    counts: Counter[str] = Counter()
    pages: set[int] = set()
    light = (
        Compensation.objects.filter(run=timeline.run)
        .order_by("-pk")
        .values_list("call_id", "status", "tool")
    )
    undo: list[tuple[str, str]] = []
    for call_pk, status, tool in light:
        counts[status] += 1
        pages.add(timeline.call_pages.get(call_pk, current))
        undo.append((tool, status))
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
    return RunCompensations(
        rows=rows,
        total=sum(counts.values()),
        by_status=[(s.value, counts[s.value]) for s in Compensation.Status if counts[s.value]],
        elsewhere=_ranges(sorted(pages - {current})),
        paged=timeline.window.pages > 1,
        aborted=_aborted(timeline, undo),
    )


def _aborted(timeline: Timeline, undo: list[tuple[str, str]]) -> str:
    """The runs list's sentence for an aborted run, on its page too (toolops/summary.py)."""
    if timeline.run.status not in ABORT_STATES:
        return ""
    return abort_text(status=timeline.run.status, calls=timeline.agent_calls, undo=undo)


def _ranges(pages: list[int]) -> list[PageRange]:
    """[1, 2, 3, 5] → 1–3, 5: a run of thousands of calls still links in a line."""
    ranges: list[PageRange] = []
    for page in pages:
        if ranges and ranges[-1].last == page - 1:
            ranges[-1] = PageRange(ranges[-1].first, page)
        else:
            ranges.append(PageRange(page, page))
    return ranges
