"""Reads that also check access."""

from __future__ import annotations

import re

from django.http import Http404

from toolops.models import Agent, Run, ToolCall

ID_RE = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")


def run_get_for_agent(*, agent: Agent, run_id: str) -> Run:
    """The agent's own run; another agent's, a missing or a malformed id → 404."""
    if not ID_RE.match(run_id):
        raise Http404("no such run")
    try:
        return Run.objects.for_agent(agent).get(run_id=run_id)
    except Run.DoesNotExist:
        raise Http404("no such run") from None


def call_get_for_agent(*, agent: Agent, call_id: str) -> ToolCall:
    if not ID_RE.match(call_id):
        raise Http404("no such call")
    try:
        return ToolCall.objects.select_related("run").get(call_id=call_id, run__agent=agent)
    except ToolCall.DoesNotExist:
        raise Http404("no such call") from None
