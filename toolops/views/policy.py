"""/console/policy/ (operators): the agent policy (API.md "Agent policy") — the version in
force in words, the proposals waiting for a second operator, an editor that validates
as you type, Simulate before Apply, the history with a diff between any two versions,
and rollback; `/console/policy/versions/<n>/` shows one version's text.

The writes are in policy_edit.py (validate, simulate, apply) and policy_versions.py
(rollback, confirm, withdraw); they all answer with `policy_page` when they refuse, so
what was typed stays and the reason is shown above the editor. The choices API.md leaves
open: docs/policy.md "The console"."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.http import Http404, HttpResponse, QueryDict
from django.shortcuts import render
from django.views.decorators.http import require_GET

from toolops.permissions import console_required, require_policy_editor
from toolops.policy import versions
from toolops.policy.models import PolicyVersion
from toolops.policy.simulate import Simulation
from toolops.tools import registry
from toolops.tools.catalog import CatalogError
from toolops.views.common import HtmxHttpRequest, page_context
from toolops.views.policy_forms import DAYS, CompareForm, DraftForm, starter
from toolops.views.policy_read import (
    DiffLine,
    Shown,
    VersionRow,
    active_shown,
    diff_lines,
    history,
)


@dataclass(frozen=True)
class Proposal:
    """A version waiting for a second operator, with its diff against the one in force."""

    version: PolicyVersion
    lines: list[DiffLine]
    mine: bool


@dataclass(frozen=True)
class Comparison:
    old: int | None
    new: int | None
    lines: list[DiffLine]
    problem: str = ""


@require_GET
@console_required
def policy_home(request: HtmxHttpRequest) -> HttpResponse:
    require_policy_editor(request.user)
    return policy_page(request, compare_query=request.GET)


@require_GET
@console_required
def policy_version(request: HtmxHttpRequest, number: int) -> HttpResponse:
    """One version: who, when, why, its text, and what it changed from the one before.
    Every console user may read it: the approval and call pages link here to name the
    rule that held or refused a call. Only operators get its rollback form."""
    version = (
        PolicyVersion.objects.select_related("created_by", "confirmed_by")
        .filter(number=number)
        .first()
    )
    if version is None:
        raise Http404("no such policy version")
    rows = history()
    row = next(r for r in rows if r.version.pk == version.pk)
    before = _before(version, rows)
    lines = diff_lines(
        before.text if before else "",
        version.text,
        old_name=f"v{before.number}" if before else "no policy",
        new_name=f"v{version.number}",
    )
    ctx = page_context(request, "policy", row=row, version=version, before=before, lines=lines)
    return render(request, "console/policy_version.html", ctx)


def _before(version: PolicyVersion, rows: Sequence[VersionRow]) -> PolicyVersion | None:
    """What the version changed from: for a proposal, the version in force; otherwise
    the applied version numbered just below it."""
    if version.state == PolicyVersion.State.PROPOSED:
        return next((r.version for r in rows if r.active), None)
    earlier = (
        r.version
        for r in rows
        if r.version.number < version.number and r.version.state == PolicyVersion.State.APPLIED
    )
    return next(earlier, None)


def policy_page(
    request: HtmxHttpRequest,
    *,
    form: DraftForm | None = None,
    simulation: Simulation | None = None,
    refusals: Sequence[str] = (),
    check: str = "",
    compare_query: QueryDict | None = None,
    status: int = 200,
) -> HttpResponse:
    """The page, with the draft as posted (or the active text, or a starter), its check
    line when it was checked, and why a write was refused, when it was."""
    shown = active_shown()
    rows = history()
    if form is None:
        form = DraftForm(initial={"text": _initial_text(shown), "days": DAYS})
    comparison = _comparison(compare_query or QueryDict(), rows)
    ctx = page_context(
        request,
        "policy",
        shown=shown,
        form=form,
        draft=_draft_text(form),
        simulation=simulation,
        simulated_ok=form.is_bound and form.simulated_now(),
        refusals=list(refusals),
        check=check,
        check_ok=bool(check) and not refusals,
        history=rows,
        proposals=_proposals(rows, shown, request.user),
        comparison=comparison,
        two_person=versions.two_person(),
    )
    if comparison.problem and status == 200:
        status = 400
    return render(request, "console/policy.html", ctx, status=status)


def _initial_text(shown: Shown | None) -> str:
    if shown is not None:
        return shown.version.text
    try:
        return starter(registry.public_tools())
    except CatalogError:
        return starter([])


def _draft_text(form: DraftForm) -> str:
    if form.is_bound:
        return str(form.data.get("text", ""))
    return str(form.initial.get("text", ""))


def _proposals(rows: Sequence[VersionRow], shown: Shown | None, user: Any) -> list[Proposal]:
    base = shown.version if shown is not None else None
    found = []
    for row in rows:
        version = row.version
        if version.state != PolicyVersion.State.PROPOSED:
            continue
        lines = diff_lines(
            base.text if base else "",
            version.text,
            old_name=f"v{base.number} (in force)" if base else "no policy",
            new_name=f"v{version.number} (proposed)",
        )
        mine = version.created_by_id is not None and version.created_by_id == user.pk
        found.append(Proposal(version, lines, mine))
    return found


def _comparison(query: QueryDict, rows: Sequence[VersionRow]) -> Comparison:
    """`?old=N&new=M`: the diff between two versions; by default the version in force
    against the applied one before it (nothing to compare with fewer than two)."""
    texts = {r.version.number: r.version.text for r in rows}
    if "old" not in query and "new" not in query:
        applied = [r.version.number for r in rows if r.version.state == "applied"]
        if len(applied) < 2:
            return Comparison(None, None, [])
        old, new = applied[1], applied[0]
    else:
        form = CompareForm(query)
        if not form.is_valid():
            return Comparison(None, None, [], "Choose two versions to compare.")
        old, new = form.cleaned_data["old"], form.cleaned_data["new"]
        missing = [f"v{n}" for n in (old, new) if n not in texts]
        if missing:
            return Comparison(old, new, [], f"There is no version {' or '.join(missing)}.")
    lines = diff_lines(texts[old], texts[new], old_name=f"v{old}", new_name=f"v{new}")
    return Comparison(old, new, lines)
