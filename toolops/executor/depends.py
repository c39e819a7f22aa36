"""The dependency check (DESIGN.md): a call that names `depends_on` runs only when each
of those calls of the same run succeeded; otherwise it is `skipped`, with nothing sent.
An id the run does not have is the agent's mistake: a 400."""

from __future__ import annotations

from toolops.models import Run, ToolCall

from .errors import BadCallRequest


def failed(run: Run, ids: list[str]) -> list[str]:
    """The depends_on ids that did not succeed; an id unknown in this run is refused."""
    if not ids:
        return []
    statuses = dict(
        ToolCall.objects.filter(run=run, tool_call_id__in=ids).values_list("tool_call_id", "status")
    )
    missing = [i for i in ids if i not in statuses]
    if missing:
        raise BadCallRequest(
            "depends_on", f"unknown tool_call_id in this run: {', '.join(missing)}"
        )
    return [i for i in ids if statuses[i] not in ToolCall.USABLE]
