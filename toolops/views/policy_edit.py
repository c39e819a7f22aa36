"""The policy page's editor: validate as you type (a fragment for htmx), Simulate (what
the draft would have done to the last days' calls, nothing written), and Apply.

Apply is refused — nothing written, the draft kept, each reason above the editor — when
the draft does not validate, when this very text was not simulated on the page (the
signed digest the simulation left, policy_forms.py), when the note is missing, or when
it is the text already in force. With two operators required it proposes instead."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from toolops.permissions import console_required, require_policy_editor
from toolops.policy import versions
from toolops.policy.document import Document, PolicyError
from toolops.policy.simulate import simulate
from toolops.views.common import HtmxHttpRequest
from toolops.views.policy import policy_page
from toolops.views.policy_forms import DraftForm, signed_digest


def _counted(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def valid_words(document: Document) -> str:
    """ "Valid: 2 grants, 3 rules, 1 limit." """
    said = (
        f"Valid: {_counted(len(document.grants), 'grant')}, "
        f"{_counted(len(document.rules), 'rule')}, {_counted(len(document.limits), 'limit')}."
    )
    if document.default == "allow" and document.grants:
        said += ' Grants are read only with default = "deny": every agent may call every tool.'
    return said


FIELDS = {"text": "draft", "days": "days", "note": "note", "simulated": "simulation"}


def form_problems(form: DraftForm) -> list[str]:
    """The form's errors, each naming its field ([] when it is valid)."""
    if form.is_valid():
        return []
    return [f"{FIELDS.get(n, n)}: {e}" for n, errors in form.errors.items() for e in errors]


@require_POST
@console_required
def policy_validate(request: HtmxHttpRequest) -> HttpResponse:
    """The editor's check line (and whether Apply is enabled, out of band)."""
    require_policy_editor(request.user)
    form = DraftForm(request.POST)
    form.is_valid()
    ok = False
    if "text" in form.errors:
        said = str(form.errors["text"][0])
    else:
        try:
            said, ok = valid_words(versions.validate(form.cleaned_data["text"])), True
        except PolicyError as exc:
            said = str(exc)
    ctx = {
        "check": said,
        "check_ok": ok,
        "simulated_ok": ok and form.simulated_now(),
        "two_person": versions.two_person(),
    }
    return render(request, "console/policy_editor.html#policy-check-answer", ctx)


@require_POST
@console_required
def policy_simulate(request: HtmxHttpRequest) -> HttpResponse:
    """The draft put to the last days' calls; the page comes back with the findings and
    Apply enabled for this text."""
    require_policy_editor(request.user)
    form = DraftForm(request.POST)
    if not form.is_valid():
        return policy_page(request, form=form, refusals=form_problems(form), status=400)
    text = form.cleaned_data["text"]
    try:
        document = versions.validate(text)
    except PolicyError as exc:
        return policy_page(request, form=form, refusals=[str(exc)], check=str(exc), status=400)
    simulation = simulate(document, days=form.cleaned_data["days"])
    # The page carries proof that this text was simulated: Apply checks it.
    data = request.POST.copy()  # the form's data
    data["simulated"] = signed_digest(text)
    return policy_page(
        request, form=DraftForm(data), simulation=simulation, check=valid_words(document)
    )


@require_POST
@console_required
def policy_apply(request: HtmxHttpRequest) -> HttpResponse:
    require_policy_editor(request.user)
    form = DraftForm(request.POST)
    refusals = _refusals(form)
    if refusals:
        return policy_page(request, form=form, refusals=refusals, status=400)
    propose = versions.two_person()
    try:
        version = versions.apply(
            form.cleaned_data["text"],
            note=form.cleaned_data["note"],
            actor=request.user,
            actor_name=request.user.get_username(),
            request=request,
            propose=propose,
        )
    except PolicyError as exc:
        # The catalog or the agents changed since the check above.
        return policy_page(request, form=form, refusals=[str(exc)], status=400)
    if propose:
        messages.success(
            request,
            f"Policy v{version.number} proposed: it is in force once another operator confirms it.",
        )
    else:
        messages.success(
            request,
            f"Policy v{version.number} applied: every web process and worker uses it for "
            "the next call.",
        )
    return redirect("console:policy")


def _refusals(form: DraftForm) -> list[str]:
    """Every reason the posted draft may not be applied now ([] when it may)."""
    if not form.is_valid():
        return form_problems(form)
    text = form.cleaned_data["text"]
    try:
        versions.validate(text)
    except PolicyError as exc:
        return [str(exc)]
    found = [p for p in (form.simulation_problem(), form.note_problem()) if p]
    current = versions.active_version()
    if current is not None and current.text == text:
        found.append(f"This draft is the text of v{current.number}, in force: nothing to apply.")
    return found
