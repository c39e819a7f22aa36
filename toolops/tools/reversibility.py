"""Whether a tool's effect can be taken back, said one way wherever a person reads it: the
approval page and the queue, the e-mail and webhook, the run page. Made from the
catalog alone (the tool's kind and its compensation), so the words cannot disagree with
what ToolOps will do when a run is abandoned.

A charge that a refund undoes is `irreversible` (it acts on the outside world at once and
is held for a person) and yet it is not "beyond undoing": it is undone only by its
refund. A tool of any kind with no compensation cannot be undone by ToolOps."""

from __future__ import annotations

from dataclasses import dataclass

from toolops.tools.spec import ToolSpec


@dataclass(frozen=True)
class Reversibility:
    """One tool's answer to "can it be undone?"."""

    tool: str
    undo: str  # the tool that undoes it; "" when the catalog declares none
    reads_only: bool = False

    @property
    def undoable(self) -> bool:
        return bool(self.undo)

    @property
    def label(self) -> str:
        """The badge: a few words."""
        if self.reads_only:
            return "changes nothing"
        return f"undone only by {self.undo}" if self.undo else "cannot be undone"

    @property
    def sentence(self) -> str:
        """The one sentence, true before and after the call runs."""
        if self.reads_only:
            return f"{self.tool} only reads: it changes nothing."
        if self.undo:
            return (
                f"Only {self.undo} can undo {self.tool}: ToolOps runs it if the run is abandoned."
            )
        return f"{self.tool} cannot be undone: nothing takes it back once it has run."


def reversibility(tool: str, spec: ToolSpec | None) -> Reversibility:
    """`tool` as the catalog declares it; a tool gone from the catalog is taken for one
    that cannot be undone (the careful reading)."""
    if spec is None:
        return Reversibility(tool=tool, undo="")
    undo = spec.compensation.tool if spec.compensation else ""
    return Reversibility(tool=tool, undo=undo, reads_only=spec.kind == "read")


def approval_consequence(tool: str, spec: ToolSpec | None, *, status: str) -> str:
    """What deciding does (or did) to a held call, in the tense its approval is in:
    `status` is the approval's ("pending", "approved", "rejected", "expired")."""
    said = reversibility(tool, spec).sentence
    if status == "pending":
        return f"Approve runs {tool} now. {said}"
    if status == "approved":
        return f"Approved: {tool} was released to run. {said}"
    ended = "Rejected" if status == "rejected" else "Expired"
    return f"{ended}: {tool} was not run, and nothing was sent."
