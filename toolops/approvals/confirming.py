"""Approving on purpose. A call of an `irreversible` tool acts on the outside world the
moment it is approved, so its approval is confirmed once more, by a question that names
what it does ("Charge 89.00 EUR to customer cus_4821 for order ord_1?") and whether it
can be undone — as a `<dialog>` on the page, and as a page of its own when the approve
POST comes without `confirmed` (no JavaScript, or a script).

A confirmation, not an undo window: the call is released at once, nothing waits in a
half-decided state, and the guard is the same with and without JavaScript
(docs/approvals.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from toolops.tools import facts
from toolops.tools.reversibility import reversibility
from toolops.tools.spec import ToolSpec
from traces.services import redact

IRREVERSIBLE = "irreversible"


def needs_confirmation(tool: str, spec: ToolSpec | None) -> bool:
    """Whether approving a call of `tool` asks once more: its kind is `irreversible`, or
    the tool is gone from the catalog (taken for the careful case, as reversibility.py
    takes it)."""
    return spec is None or spec.kind == IRREVERSIBLE


@dataclass(frozen=True)
class Confirmation:
    """What the confirmation says and what its button is called."""

    question: str  # "Charge 89.00 EUR to customer cus_4821 for order ord_1?"
    facts: list[tuple[str, str]]  # the catalog's display facts, redacted
    sentence: str  # whether it can be undone, in the catalog's one wording
    # The confirm button's name: it starts with "Approve" (API.md: outside suites look
    # for a button named so), then says what it releases ("Approve: charge 89.00 EUR").
    label: str


def _label(tool: str, args: Any) -> str:
    """ "Approve: charge 89.00 EUR", or "Approve: send_notification" with no amount."""
    words = [tool]
    for path in ("amount", "currency"):
        value = facts.field_value(args, None, path)
        if value is not None:
            words.append(facts.shown(value))
    return "Approve: " + " ".join(words)


def confirmation(*, tool: str, spec: ToolSpec | None, title: str, args: Any) -> Confirmation:
    """The confirmation of approving a call of `tool` with `args`, titled `title` (the
    page's own title of the call: the question reads as the page does)."""
    shown = redact(args, spec=spec) if isinstance(args, dict) else {}
    question = title.rstrip(".") + "?"
    return Confirmation(
        question=question,
        facts=facts.facts(spec, args) if spec is not None else [],
        sentence=reversibility(tool, spec).sentence,
        label=_label(tool, shown),
    )
