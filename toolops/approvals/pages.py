"""What the approvals' pages share: finding an approval for a reviewer, a call's title in
plain words, a call as its page shows it (redacted, one way everywhere on the page), and
the header that says how the approval differs from the one just decided."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.shortcuts import get_object_or_404

from toolops.approvals import selectors
from toolops.approvals.compare import Fact, Part, changed_labels, marked_facts, marked_words
from toolops.approvals.models import Approval
from toolops.approvals.wording import CALL_STATUS_WORDS, describe
from toolops.models import ToolCall
from toolops.permissions import require_reviewer
from toolops.tools import facts
from toolops.tools.spec import ToolSpec
from toolops.tools.wording import error_sentence
from toolops.views.common import HtmxHttpRequest, pretty
from traces import services as traces
from traces.vault import args_read

# The session key of what a reviewer typed on an approval's page when nothing was decided
# (a refusal, a confirmation cancelled): the page gives it back once.
DRAFT = "approvals.draft.{}"


def get_approval(request: HtmxHttpRequest, approval_id: str) -> Approval:
    """Reviewers (and superusers) only; another console user → 403, unknown id → 404."""
    require_reviewer(request.user)
    return get_object_or_404(selectors.approvals_for_page(), approval_id=approval_id)


def title_of(call: ToolCall, spec: ToolSpec | None) -> str:
    """A call in plain words: its catalog title (tools/facts.py) when the tool has a
    summary, else the approvals' own wording. Redacted either way."""
    if spec is not None and spec.summary:
        return facts.title(spec, call.args, call.result, tool=call.tool)
    return describe(call, spec.params_schema if spec is not None else None)


def action(approval: Approval, call: ToolCall | None, specs: dict[str, ToolSpec]) -> str:
    """The held call's title; just the tool's name if the call is gone."""
    if call is None:
        return approval.tool
    return title_of(call, specs.get(call.tool))


@dataclass
class Step:
    """A call shown on an approval's page: the held one, an earlier one or a duplicate.
    Its args and result are the redacted ones, as in its title and facts: the full args
    are a page of their own, and each look there is audited."""

    call: ToolCall
    action: str
    args_json: str
    result_json: str
    error: str = ""  # the call's error as a sentence naming the service
    status: str = ""  # the call's status as a label


def step(call: ToolCall, specs: dict[str, ToolSpec]) -> Step:
    spec = specs.get(call.tool)
    return Step(
        call=call,
        action=title_of(call, spec),
        error=error_sentence(call.error_message, tool=call.tool, spec=spec),
        status=CALL_STATUS_WORDS.get(call.status, call.status),
        args_json=pretty(traces.redact(call.args, spec=spec)),
        result_json=pretty(traces.redact(call.result, spec=spec, result=True)),
    )


@dataclass
class Header:
    """The approval's title and facts, marked where they differ from `before` (the one
    the reviewer just decided), with the differences named."""

    title: list[Part]
    facts: list[Fact]
    before: Approval | None = None
    before_title: str = ""
    differences: list[str] = field(default_factory=list)


def header(
    approval: Approval, call: ToolCall | None, specs: dict[str, ToolSpec], *, after: str
) -> Header:
    """`after`: the approval_id the reviewer decided just before opening this one ("" if
    none); an unknown one, or this one, compares with nothing."""
    spec = specs.get(approval.tool)
    title = action(approval, call, specs)
    pairs = facts.facts(spec, call.args, call.result) if call is not None else []
    before = None
    if after and after != approval.approval_id:
        before = selectors.approval_for_page(approval_id=after)
    before_call = selectors.held_call(before) if before is not None else None
    if before is None or before_call is None:
        return Header([Part(title)], marked_facts(pairs, None))
    before_spec = specs.get(before_call.tool)
    before_title = title_of(before_call, before_spec)
    before_pairs = facts.facts(before_spec, before_call.args, before_call.result)
    marked_title = marked_words(title, before_title)
    marked = marked_facts(pairs, before_pairs)
    return Header(marked_title, marked, before, before_title, changed_labels(marked_title, marked))


def args_problem(call: ToolCall) -> str:
    """Why approving `call` would send nothing, "" if it would: its full args cannot be
    opened (traces/vault.py). Only checked, never shown: no look to audit."""
    _args, problem = args_read(call)
    return problem.reason if problem is not None else ""


def draft(request: HtmxHttpRequest, approval: Approval) -> dict[str, Any]:
    """What the reviewer typed here before nothing was decided, given back once."""
    return dict(request.session.pop(DRAFT.format(approval.approval_id), {}))


def keep_draft(request: HtmxHttpRequest, approval: Approval, typed: dict[str, str]) -> None:
    if any(typed.values()):
        request.session[DRAFT.format(approval.approval_id)] = typed
