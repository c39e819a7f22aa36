"""The metrics page's order: what needs a look comes first. Tools that crossed a threshold,
then tools with anything in the window (or open now), each as its full card; the idle
rest by name only, so a catalog of many quiet tools does not bury the few busy ones.
One tool asked for by name (`?tool=`) always gets its card, idle or not."""

from __future__ import annotations

from dataclasses import dataclass, field

from .figures import ToolFigures
from .tiles import Card, card


@dataclass
class Sections:
    flagged: list[Card] = field(default_factory=list)
    active: list[Card] = field(default_factory=list)
    idle: list[Card] = field(default_factory=list)

    @property
    def total(self) -> int:
        return len(self.flagged) + len(self.active) + len(self.idle)


def sections(figures: list[ToolFigures], scale: str) -> Sections:
    """Each tool's card in its section, in the order of `figures` within each."""
    out = Sections()
    for f in figures:
        c = card(f, scale)
        # A tile's flag decides, not a second reading of the thresholds: whatever the
        # card highlights is what puts the tool first.
        if c.flags:
            out.flagged.append(c)
        elif f.active(scale):
            out.active.append(c)
        else:
            out.idle.append(c)
    return out
