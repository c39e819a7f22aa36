"""Times and errors on the desk in the reader's words and absolute: "06:30 UTC (in 4 min)",
never "2026-12-07T06:30:04Z" (`at_words`, toolops/templatetags/when.py, as for every
time said in a sentence). An
error is worded by `error_sentence` (toolops/tools/wording.py), as on the approval page;
the stored text stays in the page's tooltip and Technical details."""

from __future__ import annotations

import re
from datetime import datetime

from toolops.templatetags.when import at_words
from toolops.tools.spec import ToolSpec
from toolops.tools.wording import error_sentence, service_name

# An ISO 8601 time as the executor writes it in a message ("circuit open until …Z").
ISO = re.compile(r"\b\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})")
CIRCUIT = re.compile(r"^circuit open(?: until (?P<until>\S+))?\s*$")


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
