"""Times and errors on the desk in the reader's words and absolute: "06:30 UTC (in 4 min)",
never "2026-12-07T06:30:04Z". The words come from `waited` and `ago`
(toolops/templatetags/when.py), as on every console page; the absolute time is UTC, said
so, because these are sentences a person may copy into a message to a colleague. An
error is worded by `error_sentence` (toolops/tools/wording.py), as on the approval page;
the stored text stays in the page's tooltip and Technical details."""

from __future__ import annotations

import re
from datetime import UTC, datetime

from toolops.templatetags.when import ago, waited
from toolops.tools.spec import ToolSpec
from toolops.tools.wording import error_sentence, service_name

# An ISO 8601 time as the executor writes it in a message ("circuit open until …Z").
ISO = re.compile(r"\b\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})")
CIRCUIT = re.compile(r"^circuit open(?: until (?P<until>\S+))?\s*$")


def relative(when: datetime, now: datetime) -> str:
    """ "in 4 min", "3 min ago", "just now"."""
    if when <= now:
        return ago(when, now)
    said = waited(now, when)
    return "in under a minute" if said == "just now" else f"in {said}"


def clock(when: datetime, now: datetime) -> str:
    """The absolute time, as short as it can be: "06:30 UTC" today, else with its day."""
    utc, today = when.astimezone(UTC), now.astimezone(UTC).date()
    if utc.date() == today:
        return f"{utc:%H:%M} UTC"
    return f"{utc.day} {utc:%b %Y} {utc:%H:%M} UTC"


def at_words(when: datetime, now: datetime) -> str:
    """ "06:30 UTC (in 4 min)", "6 Dec 2026 22:10 UTC (8 h 20 min ago)"."""
    return f"{clock(when, now)} ({relative(when, now)})"


def day_words(when: datetime) -> str:
    """ "7 Dec 2026 at 06:31 UTC": when something happened for good."""
    utc = when.astimezone(UTC)
    return f"{utc.day} {utc:%b %Y} at {utc:%H:%M} UTC"


def _parsed(text: str) -> datetime | None:
    try:
        found = datetime.fromisoformat(text)
    except ValueError:
        return None
    return found if found.tzinfo is not None else None


def times_in_text(text: str, now: datetime) -> str:
    """`text` with each ISO time in it said as `at_words` does."""

    def said(match: re.Match[str]) -> str:
        when = _parsed(match.group(0))
        return at_words(when, now) if when is not None else match.group(0)

    return ISO.sub(said, text) if text else text


def error_words(text: str, *, tool: str, spec: ToolSpec | None, now: datetime) -> str:
    """A stored error as a sentence naming the service, its times in words: "not sent:
    the payments service kept failing and its circuit is open until 06:30 UTC (in 4 min)"
    for the executor's "circuit open until 2026-12-07T06:30:04Z"."""
    text = (text or "").strip()
    circuit = CIRCUIT.match(text)
    if circuit is None:
        return times_in_text(error_sentence(text, tool=tool, spec=spec), now)
    the = f"the {service_name(tool, spec)} service"
    until = _parsed(circuit.group("until") or "")
    if until is None:
        return f"not sent: {the} kept failing and its circuit is open"
    tense = "is" if until > now else "was"
    return f"not sent: {the} kept failing and its circuit {tense} open until {at_words(until, now)}"
