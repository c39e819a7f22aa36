"""Two calls side by side, their differences marked: the approval a reviewer opens next
against the one just decided ("the next one looks like the last"), and a possible
duplicate against the call it may repeat. Built from the catalog's title and display facts
(toolops/tools/facts.py), redacted by the tool's rules like everything on the page."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from difflib import SequenceMatcher

from toolops.models import ToolCall
from toolops.templatetags.when import waited
from toolops.tools import facts
from toolops.tools.spec import ToolSpec

WORDS = re.compile(r"\S+|\s+")

# The earlier call's status as the opening of "Already done: order id ord_1, succeeded, …".
DONE = {
    "succeeded": "Already done",
    "degraded": "Already done in part",
    "unknown": "Perhaps already done",
    "pending_approval": "Already waiting for a reviewer",
    "in_progress": "Already under way",
}


@dataclass(frozen=True)
class Part:
    """A piece of text, marked (`<mark>`) when it differs from the other call's."""

    text: str
    changed: bool = False


@dataclass(frozen=True)
class Fact:
    label: str
    value: str
    changed: bool = False


def marked_words(text: str, other: str | None) -> list[Part]:
    """`text` in pieces, the words that `other` does not have at that place marked; all
    of it unmarked when there is nothing to compare with."""
    if other is None:
        return [Part(text)]
    mine, theirs = WORDS.findall(text), WORDS.findall(other)
    parts: list[Part] = []
    matcher = SequenceMatcher(None, theirs, mine, autojunk=False)
    for tag, _i1, _i2, j1, j2 in matcher.get_opcodes():
        piece = "".join(mine[j1:j2])
        if not piece:
            continue
        changed = tag != "equal" and bool(piece.strip())
        if parts and parts[-1].changed == changed:
            piece = parts.pop().text + piece
        parts.append(Part(piece, changed))
    return parts or [Part(text)]


def marked_facts(pairs: list[tuple[str, str]], other: list[tuple[str, str]] | None) -> list[Fact]:
    """The facts `pairs`, each marked when `other` has another value for it (or none)."""
    if other is None:
        return [Fact(label, value) for label, value in pairs]
    theirs = dict(other)
    return [Fact(label, value, theirs.get(label) != value) for label, value in pairs]


def changed_labels(title: list[Part], marked: list[Fact]) -> list[str]:
    """What differs, named by its facts ("Order id", …); "title" when only the title
    says it (a tool without display facts)."""
    named = [f.label for f in marked if f.changed]
    if not named and any(p.changed for p in title):
        named = ["title"]
    return named


# -- a possible duplicate against the call it may repeat ---------------------------------


@dataclass(frozen=True)
class Row:
    """One line of the comparison: a label, this call's value, the earlier call's."""

    label: str
    this: list[Part]
    done: list[Part]


@dataclass(frozen=True)
class Comparison:
    outcome: str  # "Already done: order id ord_1, succeeded, 3 min ago in run r-117."
    rows: list[Row]
    differences: list[str]  # the labels that differ, [] when the two ask the same


def _args_facts(spec: ToolSpec | None, call: ToolCall) -> list[tuple[str, str]]:
    return facts.facts(spec, call.args) if spec is not None else []


def _result_facts(spec: ToolSpec | None, call: ToolCall) -> list[tuple[str, str]]:
    """The display facts only the result holds (the order id an order got)."""
    if spec is None:
        return []
    asked = dict(_args_facts(spec, call))
    return [p for p in facts.facts(spec, call.args, call.result) if p[0] not in asked]


def _ago(since: datetime, now: datetime) -> str:
    said = waited(since, now)
    return said if said == "just now" else f"{said} ago"


def done_outcome(spec: ToolSpec | None, done: ToolCall, now: datetime) -> str:
    """The earlier call's outcome in one sentence, its result's facts first."""
    opening = DONE.get(done.status, "Made before")
    bits = [f"{label.lower()} {value}" for label, value in _result_facts(spec, done)]
    bits.append(done.status.replace("_", " "))
    bits.append(f"{_ago(done.finished_at or done.created_at, now)} in run {done.run.run_id}")
    return f"{opening}: {', '.join(bits)}."


def _fact_rows(spec: ToolSpec | None, this: ToolCall, done: ToolCall) -> list[Row]:
    mine, theirs = dict(_args_facts(spec, this)), dict(_args_facts(spec, done))
    labels = list(mine) + [label for label in theirs if label not in mine]
    rows = []
    for label in labels:
        a, b = mine.get(label, facts.MISSING), theirs.get(label, facts.MISSING)
        rows.append(Row(label, [Part(a, a != b)], [Part(b, a != b)]))
    return rows


def duplicate_comparison(
    *,
    spec: ToolSpec | None,
    this: ToolCall,
    this_title: str,
    this_run: str,
    done: ToolCall,
    done_title: str,
    now: datetime,
) -> Comparison:
    """The held call (`this`, of run `this_run`) against the earlier one it may repeat:
    what each asks (title and facts, the differences marked), what the earlier one's
    result holds, and when."""
    title = Row("What", marked_words(this_title, done_title), marked_words(done_title, this_title))
    rows = [title, *_fact_rows(spec, this, done)]
    for label, value in _result_facts(spec, done):
        rows.append(Row(label, [Part("not yet: waiting for you")], [Part(value)]))
    rows.append(
        Row(
            "When",
            [Part(f"{_ago(this.created_at, now)}, in run {this_run}")],
            [Part(f"{_ago(done.created_at, now)}, in run {done.run.run_id}")],
        )
    )
    differences = [r.label for r in rows[1:] if any(p.changed for p in r.this)]
    if not differences and any(p.changed for p in title.this):
        differences = ["title"]
    return Comparison(done_outcome(spec, done, now), rows, differences)
