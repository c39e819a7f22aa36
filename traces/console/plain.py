"""A run in one or two plain sentences, first on its page: how it stands or how it ended,
what its calls did (each by the catalog's title, toolops/tools/facts.py) and, for an
aborted run, what ToolOps undid and what it could not.

Built apart from the API's `summary` (toolops/summary.py), whose first sentence is a
contract with the agent ("Based on partial data: …"). The page once showed that summary
after the runs list's abort sentence, and an aborted run read "Aborted after 3 of 3 tool
calls succeeded; … All 3 of 3 tool calls succeeded." Here an aborted run says what was
done and then what was taken back, never that all succeeded.

Pure functions of plain values (traces/console/story.py gathers them from the run), so
every sentence can be pinned by a test."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from toolops.models import Run, ToolCall

S = ToolCall.Status
R = Run.Status

SHOWN = 4  # titles listed before "and N more": the sentence must stay a sentence
PROBLEMS_SHOWN = 3
# A compensation's status (compensations/models.py), as this module groups them.
UNDONE, FAILED, BY_HAND, DISCARDED = "succeeded", "dead_lettered", "resolved", "discarded"


@dataclass(frozen=True)
class Step:
    """One of the agent's calls: its title, its status, and — when it did not succeed —
    what became of it ("failed — the payments service answered 503 (unavailable)")."""

    title: str
    status: str
    outcome: str = ""

    @property
    def done(self) -> bool:
        return self.status == S.SUCCEEDED


@dataclass(frozen=True)
class Undo:
    """What undoes one of the calls (a compensation): its title ("Refund charge ch_1"),
    its status, and the support ticket opened when it could not be done."""

    title: str
    status: str
    ticket: int | None = None


def run_story(
    *,
    status: str,
    steps: Sequence[Step],
    undos: Sequence[Undo],
    aborted_by: str = "the agent",
    used_up: Sequence[str] = (),
) -> str:
    """The sentences. `undos`: newest first; `aborted_by`: "the agent", a person's name,
    or ToolOps; `used_up`: the budgets a budget-exhausted run used up ("attempts")."""
    if status == R.RUNNING:
        return f"Running: {_calls(steps, so_far=True)}." if steps else "Running: no call yet."
    if status == R.COMPLETED:
        return f"Completed after {_calls(steps)}." if steps else "Completed without any call."
    if status == R.BUDGET_EXHAUSTED:
        budget = _and(list(used_up)) + " budget" if used_up else "budget"
        head = f"Stopped: the run used up its {budget}"
        head += f" after {_calls(steps)}." if steps else " before any call."
        return f"{head} {_would_undo(undos)}"
    head = f"Aborted by {aborted_by}"
    head += f" after {_calls(steps)}." if steps else " before any call."
    return f"{head} {_undone(undos, going=status == R.ABORTING)}"


def _calls(steps: Sequence[Step], *, so_far: bool = False) -> str:
    """ "3 calls, all done: A; B; C", or "4 calls, 2 done (A; B); C failed — …"."""
    count = f"{len(steps)} call{'s' if len(steps) != 1 else ''}" + (" so far" if so_far else "")
    done = [s.title for s in steps if s.done]
    problems = [f"{s.title} {s.outcome}" for s in steps if not s.done]
    if not problems:
        return f"{count}, {_all_done(len(done))}: {_titles(done)}"
    shown = problems[:PROBLEMS_SHOWN]
    if len(problems) > PROBLEMS_SHOWN:
        shown.append(f"and {len(problems) - PROBLEMS_SHOWN} more did not succeed")
    if not done:
        return f"{count}: {'; '.join(shown)}"
    return f"{count}, {len(done)} done ({_titles(done)}); {'; '.join(shown)}"


def _undone(undos: Sequence[Undo], *, going: bool) -> str:
    """What ToolOps undid of an aborted run, is undoing, and could not undo."""
    undos = [u for u in undos if u.status != DISCARDED]
    if not undos:
        return "Nothing needed undoing."
    # An undo that succeeded once support retried it says so: the ticket tells the story.
    done = [u.title + _ticket(u, ", after support ticket #{}") for u in undos if u.status == UNDONE]
    waiting = [u.title for u in undos if u.status not in (UNDONE, FAILED, BY_HAND)]
    settled = [_settled(u) for u in undos if u.status in (FAILED, BY_HAND)]
    if not done and not waiting:
        return f"ToolOps could not undo {_all(len(undos))}: {'; '.join(settled)}."
    parts = []
    if len(done) == len(undos):
        parts.append(f"ToolOps undid {_all(len(done))} ({_titles(done)})")
    elif done:
        parts.append(f"ToolOps undid {len(done)} of {len(undos)} ({_titles(done)})")
    if waiting:
        verb = "is undoing" if going else "has still to undo"
        which = "the rest" if done else _all(len(waiting))
        parts.append(f"{'it' if done else 'ToolOps'} {verb} {which} ({_titles(waiting)})")
    return "; ".join(parts + settled) + "."


def _would_undo(undos: Sequence[Undo]) -> str:
    """A budget-exhausted run keeps its changes; an abort would take them back."""
    waiting = [u.title for u in undos if u.status not in (UNDONE, FAILED, BY_HAND, DISCARDED)]
    if not waiting:
        return "Nothing would need undoing."
    return f"If the run is aborted, ToolOps undoes {_titles(waiting)}."


def _settled(undo: Undo) -> str:
    """An undo that ended without taking effect: failed (a ticket is open), or settled
    by hand by support staff."""
    if undo.status == BY_HAND:
        return f"{undo.title} was settled by hand{_ticket(undo, ' (support ticket #{})')}"
    return f"{undo.title} failed{_ticket(undo, ' — support ticket #{}')}"


def _ticket(undo: Undo, form: str) -> str:
    return form.format(undo.ticket) if undo.ticket is not None else ""


def _all(count: int) -> str:
    """ "it" / "both" / "all 3"."""
    return "it" if count == 1 else "both" if count == 2 else f"all {count}"


def _all_done(count: int) -> str:
    """ "done" / "both done" / "all done", after "N calls, "."""
    return "done" if count == 1 else "both done" if count == 2 else "all done"


def _titles(titles: Sequence[str]) -> str:
    """ "A; B ×3; C and 5 more": repeated titles counted once, at most SHOWN listed."""
    counts: dict[str, int] = {}
    for title in titles:
        counts[title] = counts.get(title, 0) + 1
    groups = [f"{t} ×{n}" if n > 1 else t for t, n in counts.items()]
    listed = "; ".join(groups[:SHOWN])
    rest = sum(list(counts.values())[SHOWN:])
    return f"{listed} and {rest} more" if rest else listed


def _and(words: list[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]
