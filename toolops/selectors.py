"""Reads that also check access."""

from __future__ import annotations

import re

from django.db.models import OuterRef, Subquery
from django.http import Http404

from toolops.models import Agent, Run, ToolCall

ID_RE = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")


def check_id(value: str, what: str) -> None:
    """A malformed id in a URL path answers 404, like an id that is not the agent's."""
    if not ID_RE.match(value):
        raise Http404(f"no such {what}")


def run_get_for_agent(*, agent: Agent, run_id: str, tool_call_id: str | None = None) -> Run:
    """The agent's own run; another agent's, a missing or a malformed id → 404.

    With `tool_call_id`, the same query also says whether the run already has a call
    with that id (`run.existing_call_pk`): one statement fewer on every call."""
    check_id(run_id, "run")
    runs = Run.objects.for_agent(agent)
    if tool_call_id is not None:
        existing = ToolCall.objects.filter(run=OuterRef("pk"), tool_call_id=tool_call_id)
        runs = runs.annotate(existing_call_pk=Subquery(existing.values("pk")[:1]))
    try:
        return runs.get(run_id=run_id)
    except Run.DoesNotExist:
        raise Http404("no such run") from None


def call_get_for_agent(*, agent: Agent, call_id: str) -> ToolCall:
    check_id(call_id, "call")
    try:
        return ToolCall.objects.select_related("run").get(call_id=call_id, run__agent=agent)
    except ToolCall.DoesNotExist:
        raise Http404("no such call") from None
