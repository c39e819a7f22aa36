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
    """One reviewer's decision, from the Decide box: ONE form with both notes, so the
    server sees a reason typed to reject even when Approve was pressed (and asks which
    was meant, rather than drop it). Whether a note is needed (to reject) is the service's
    rule, so both stay optional here and the service's message is shown."""

    decision = forms.ChoiceField(
        choices=[("approve", "Approve"), ("reject", "Reject")],
        error_messages={
            "required": "Choose Approve or Reject.",
            "invalid_choice": "Choose Approve or Reject.",
        },
    )
    # The note with an approval. Clients that post one `note` with either decision (the
    # form before this one, scripts) still reject with it: see `reason_to_reject`.
    note = forms.CharField(required=False, max_length=NOTE_MAX, strip=True)
    reject_reason = forms.CharField(required=False, max_length=NOTE_MAX, strip=True)
    # The args digest of the page the reviewer decided on: the service refuses a decision
    # made on other args than the approval holds.
    args_hash = forms.CharField(
        max_length=64,
        widget=forms.HiddenInput,
        error_messages={"required": "The page was incomplete: reload it and decide again."},
    )
    # Sent only by the confirmation's own button (the dialog, or the page without
    # JavaScript): approving an irreversible call without it decides nothing.
    confirmed = forms.BooleanField(required=False)
    # "Approve anyway (the reason is discarded)": the reviewer saw the reason and let it go.
    discard_reason = forms.BooleanField(required=False)

    @property
    def approve(self) -> bool:
        return self.cleaned_data["decision"] == "approve"

    def reason_to_reject(self) -> str:
        """The rejection's reason: the "Why reject" box, or — from a client that posts a
        single `note` and no `reject_reason` field at all — that note."""
        if "reject_reason" in self.data:
            return str(self.cleaned_data["reject_reason"])
        return str(self.cleaned_data["note"])

    def unheard_reason(self) -> str:
        """A reason typed to reject that an approval would drop, "" if none: the reviewer
        is asked which was meant."""
        if not self.approve or self.cleaned_data["discard_reason"]:
            return ""
        return str(self.cleaned_data["reject_reason"])

    def typed(self) -> dict[str, str]:
        """What the reviewer typed, to give back to the page when nothing was decided."""
        return {
            name: str(self.data.get(name, "")).strip()[:NOTE_MAX]
            for name in ("note", "reject_reason")
        }

    def problem(self) -> str:
        """The first error, as one sentence for a message."""
        for name in ("decision", "args_hash", "note", "reject_reason"):
            if name in self.errors:
                label = {"note": "Note: ", "reject_reason": "Why reject: "}.get(name, "")
                return f"{label}{self.errors[name][0]}"
        return "The decision could not be read."
