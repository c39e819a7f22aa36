"""The policy page's forms: the draft (its text, the days to simulate, the note an apply
needs, and the signed digest of the text last simulated), a rollback's note, and the
two versions to compare.

A draft's text is kept as the document will be stored: line ends as "\\n" (a browser
sends a textarea's as "\\r\\n", htmx as "\\n"; either way one digest) and a final newline.
The simulated digest is signed by the server, so Apply can trust that this very text was
simulated here rather than take a hidden field's word for it."""

from __future__ import annotations

import hashlib

from django import forms
from django.core import signing

from toolops.tools.spec import ToolSpec

MAX_TEXT = 100_000
MAX_NOTE = 1000
DAYS = 7
MAX_DAYS = 90
SALT = "toolops.policy.simulated"


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def signed_digest(text: str) -> str:
    """What the page carries after a simulation of `text`."""
    return signing.dumps(digest(text), salt=SALT)


def normalised(text: str) -> str:
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text if not text.strip() or text.endswith("\n") else f"{text}\n"


class DraftForm(forms.Form):
    text = forms.CharField(
        strip=False,
        max_length=MAX_TEXT,
        error_messages={"required": 'The draft is empty: write at least default = "allow".'},
    )
    days = forms.IntegerField(required=False, min_value=1, max_value=MAX_DAYS, initial=DAYS)
    note = forms.CharField(required=False, max_length=MAX_NOTE)
    simulated = forms.CharField(required=False, max_length=500, widget=forms.HiddenInput)

    def clean_text(self) -> str:
        return normalised(self.cleaned_data["text"])

    def clean_days(self) -> int:
        return self.cleaned_data.get("days") or DAYS

    def simulation_problem(self) -> str:
        """Why the text may not be applied yet: never simulated, or changed since ("" when
        this very text was simulated). Call after is_valid()."""
        token = self.cleaned_data.get("simulated", "")
        if not token:
            return "Simulate this draft before Apply: see what it would have done first."
        try:
            simulated = signing.loads(token, salt=SALT)
        except signing.BadSignature:
            return "Simulate this draft again before Apply: its simulation could not be read."
        if simulated != digest(self.cleaned_data["text"]):
            return "The draft changed since it was simulated: Simulate it again before Apply."
        return ""

    def note_problem(self) -> str:
        if not self.cleaned_data.get("note", "").strip():
            return "Write a note (the note field is required): say why the policy changes."
        return ""

    def simulated_now(self) -> bool:
        """Whether the posted text is the one simulated (Apply enabled), for the page."""
        return self.is_valid() and not self.simulation_problem()


class RollbackForm(forms.Form):
    note = forms.CharField(required=False, max_length=MAX_NOTE)


class CompareForm(forms.Form):
    """`?old=N&new=M` on the policy page."""

    old = forms.IntegerField(min_value=1, max_value=2**31 - 1)
    new = forms.IntegerField(min_value=1, max_value=2**31 - 1)


def starter(specs: list[ToolSpec]) -> str:
    """The editor's text when no policy is in force: `default = "allow"` (what no policy
    means) and an example of each table, commented out, naming this catalog's tools."""
    names = [spec.name for spec in specs] or ["query_stock"]
    decimal = next(((s.name, f) for s in specs for f in _decimal_fields(s)), None)
    tool, condition = (
        (decimal[0], f'context.args.{decimal[1]}.greaterThan(decimal("100.00"))')
        if decimal
        else (names[0], "principal.age_days < 7")
    )
    return STARTER.format(first=names[0], tool=tool, condition=condition)


def _decimal_fields(spec: ToolSpec) -> list[str]:
    fields = (spec.params_schema.get("properties") or {}).items()
    required = set(spec.params_schema.get("required") or ())
    return [
        name
        for name, sub in fields
        if name in required and isinstance(sub, dict) and sub.get("format") == "decimal"
    ]


STARTER = """\
# No policy is in force: every agent may call every public tool, and approvals follow
# the catalog. This draft keeps it so. Uncomment and edit what you need, Simulate it,
# then Apply it with a note.
default = "allow"   # "deny": an agent may call only what a [[grant]] gives it

# [[grant]]
# agents = ["*"]                   # agent names, or ["*"]
# tools = ["{first}"]

# [[rule]]
# name = "{tool} example"
# agents = ["*"]
# tools = ["{tool}"]
# when = '{condition}'
# action = "approve"               # approve | approve_by_two | refuse | no_approval
# mode = "log_only"                # recorded on each call, not applied

# [[limit]]
# name = "{first} calls per day"
# agents = ["*"]                   # each agent counted on its own
# tools = ["{first}"]
# max = 1000                       # calls; or sum = "amount" with max = "500.00"
# per = "day"                      # day | week | month | total
# time_zone = "UTC"
# on_exceed = "refuse"             # or "approve": a reviewer decides past it
"""
