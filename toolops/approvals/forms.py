"""The reviewer queue's filters, and a decision's input."""

from __future__ import annotations

from typing import Any

from django import forms

from toolops.approvals.models import Approval

NOTE_MAX = 4000


class ApprovalFilterForm(forms.Form):
    """Filters live in the URL, so a filtered queue can be bookmarked and shared."""

    tool = forms.CharField(required=False, max_length=128)
    agent = forms.IntegerField(required=False, min_value=1)
    reason = forms.ChoiceField(
        required=False, choices=[("", "Any reason"), *Approval.Reason.choices]
    )

    def filters(self) -> dict[str, Any]:
        """The valid filters; an invalid one is ignored rather than failing the page."""
        self.is_valid()
        return {k: v for k, v in getattr(self, "cleaned_data", {}).items() if v}


class DecisionForm(forms.Form):
    """One reviewer's decision. Whether a note is needed (to reject) is the service's
    rule, so the form leaves `note` optional and the service's message is shown."""

    decision = forms.ChoiceField(
        choices=[("approve", "Approve"), ("reject", "Reject")],
        error_messages={
            "required": "Choose Approve or Reject.",
            "invalid_choice": "Choose Approve or Reject.",
        },
    )
    note = forms.CharField(
        required=False,
        max_length=NOTE_MAX,
        strip=True,
        widget=forms.Textarea(attrs={"rows": 3}),
    )
    # The args digest of the page the reviewer decided on: the service refuses a decision
    # made on other args than the approval holds.
    args_hash = forms.CharField(
        max_length=64,
        widget=forms.HiddenInput,
        error_messages={"required": "The page was incomplete: reload it and decide again."},
    )

    def problem(self) -> str:
        """The first error, as one sentence for a message."""
        for name in ("decision", "args_hash", "note"):
            if name in self.errors:
                label = "Note: " if name == "note" else ""
                return f"{label}{self.errors[name][0]}"
        return "The decision could not be read."
