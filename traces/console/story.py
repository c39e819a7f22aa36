"""The run page's plain summary (traces/console/plain.py), gathered from what the page has
read already: the run's calls in a few columns, the page's calls whole (their titles need
the args), its compensations with their tickets — and, for an aborted run only, who
aborted it (one query of the audit log)."""

from __future__ import annotations

from compensations.models import Compensation
from toolops.audit.models import AuditEntry
from toolops.models import Run, ToolCall
from toolops.tools.facts import title
from toolops.tools.spec import ToolSpec

from .compensated import RunCompensations, UndoFacts
from .lanes import CallLane
from .plain import Step, Undo, run_story
from .timeline import Timeline
from .words import outcome_words

AGENT = "the agent"  # an abort through the API: the agent's own


def run_story_build(
    *, timeline: Timeline, compensations: RunCompensations, tools: dict[str, ToolSpec]
) -> str:
    """One or two sentences on how `timeline`'s run stands or ended, for a person."""
    run = timeline.run
    lanes = {lane.call.pk: lane for lane in timeline.rows}
    if timeline.stop is not None:
        lanes.setdefault(timeline.stop.call.pk, timeline.stop)
    steps = [_step(call, lanes.get(call.pk), tools) for call in timeline.agent_calls]
    # Only the page's compensations are read whole (with their args).
    whole = {r.compensation.call_id: r.compensation for r in compensations.rows}
    undos = [_undo(u, lanes, whole.get(u.call_pk), tools) for u in compensations.undos]
    return run_story(
        status=run.status,
        steps=steps,
        undos=undos,
        aborted_by=aborted_by(run) if run.status in Run.ABORT_STATES else AGENT,
        used_up=[line.label for line in timeline.budget if line.exhausted],
    )


def _step(call: ToolCall, lane: CallLane | None, tools: dict[str, ToolSpec]) -> Step:
    # A call off the page was read with a few columns: its tool names it, its reason
    # says what became of it.
    name = lane.name if lane is not None else call.tool
    if call.status == ToolCall.Status.SUCCEEDED:
        return Step(name, call.status)
    whole = lane.call if lane is not None else call
    outcome = outcome_words(whole, tools.get(call.tool), whole=lane is not None)
    return Step(name, call.status, outcome)


def _undo(
    undo: UndoFacts,
    lanes: dict[int, CallLane],
    compensation: Compensation | None,
    tools: dict[str, ToolSpec],
) -> Undo:
    """An undo by the title of its latest undo call, else of its registered args, else
    by its tool (a compensation of a call on another page)."""
    lane = lanes.get(undo.undo_call_pk or 0)
    spec = tools.get(undo.tool)
    if lane is not None:
        name = lane.name
    elif compensation is not None and compensation.args and spec is not None and spec.summary:
        name = title(spec, compensation.args)
    else:
        name = undo.tool
    return Undo(name, undo.status, undo.ticket)


def aborted_by(run: Run) -> str:
    """Who aborted `run`: the operator the audit log names, ToolOps for a run its agent
    left (toolops/idle.py audits it "via" itself), else the agent (the API's abort is
    not a person's action, and is not audited)."""
    # The run's id is unique per agent only: its console link (with its pk) is the run's.
    entries = AuditEntry.objects.filter(
        action=AuditEntry.Action.RUN_ABORT,
        object_type="run",
        object_id=run.run_id,
        object_url=f"/console/runs/{run.pk}/",
    )
    entry = entries.order_by("pk").only("actor_username", "detail").first()
    if entry is None:
        return AGENT
    via = entry.detail.get("via") if isinstance(entry.detail, dict) else None
    return str(via or entry.actor_username or AGENT)
