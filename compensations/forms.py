"""The support desk's forms: the queue's filters, and each action's input."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib.auth import get_user_model

from compensations.models import Ticket

NOTE_MAX = 4000


class TicketFilterForm(forms.Form):
    """Filters live in the URL, so a filtered queue can be bookmarked and shared."""

    status = forms.ChoiceField(
        required=False,
        choices=[("open", "Open"), ("snoozed", "Snoozed"), ("closed", "Closed"), ("all", "All")],
    )
    tool = forms.CharField(required=False, max_length=128, label="Undo tool")
    age = forms.ChoiceField(
        required=False,
        label="Older than",
        choices=[("", "Any age"), ("1h", "1 hour"), ("1d", "1 day"), ("7d", "7 days")],
    )
    assignee = forms.ChoiceField(required=False)
    mine = forms.BooleanField(required=False, label="Mine")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Only people who hold or held a ticket: the list stays short.
        names = (
            get_user_model()
            .objects.filter(tickets__isnull=False)
            .distinct()
            .order_by("username")
            .values_list("username", flat=True)
        )
        assignee = self.fields["assignee"]  # a copy of the declared field, typed Field
        assert isinstance(assignee, forms.ChoiceField)
        assignee.choices = [
            ("", "Anyone"),
            ("none", "Unassigned"),
            *[(n, n) for n in names],
        ]

    def filters(self) -> dict[str, Any]:
        """The valid filters (status defaults to open); an invalid one is ignored rather
        than failing the page."""
        self.is_valid()
        data = {k: v for k, v in getattr(self, "cleaned_data", {}).items() if v}
        data.setdefault("status", "open")
        return data


class NoteForm(forms.Form):
    """Resolving by hand needs a note: the next person must know what was done."""

    note = forms.CharField(
        max_length=NOTE_MAX,
        strip=True,
        widget=forms.Textarea(attrs={"rows": 3}),
        error_messages={"required": "A note is required: say how the undo was settled."},
    )


class CommentForm(forms.Form):
    text = forms.CharField(
        max_length=NOTE_MAX,
        strip=True,
        label="Comment",
        widget=forms.Textarea(attrs={"rows": 2}),
        error_messages={"required": "A comment cannot be empty."},
    )


def _person(username: str) -> Any:
    """The active user named `username`; a ValidationError naming the problem if none.
    Whether they may work tickets is the service's to say (desk.ticket_assign)."""
    username = username.strip()
    if not username:
        raise forms.ValidationError("Choose whom to assign it to.")
    person = get_user_model().objects.filter(username=username, is_active=True).first()
    if person is None:
        raise forms.ValidationError(f"There is no user “{username}”: choose one from the list.")
    return person


class AssignForm(forms.Form):
    """To me, to nobody, or to the person chosen in `user` (to = "user")."""

    to = forms.ChoiceField(
        choices=[("me", "me"), ("nobody", "nobody"), ("user", "someone")],
        error_messages={"invalid_choice": "Assign to whom? Choose “me”, “nobody” or a person."},
    )
    user = forms.CharField(required=False, max_length=150)

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("to") == "user":
            try:
                data["person"] = _person(data.get("user", ""))
            except forms.ValidationError as exc:
                self.add_error("user", exc)
        return data


class SnoozeForm(forms.Form):
    """Until when: a quick choice, or a date and time (UTC) typed in."""

    until = forms.ChoiceField(
        choices=[("1h", "1 hour"), ("tomorrow", "Tomorrow 09:00 UTC"), ("custom", "Until…")],
        error_messages={"required": "Snooze until when? Choose a time."},
    )
    at = forms.DateTimeField(
        required=False,
        label="Date and time (UTC)",
        input_formats=["%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M"],
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}, format="%Y-%m-%dT%H:%M"),
        error_messages={"invalid": "Give the date and time as 2026-12-08 09:00 (UTC)."},
    )

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("until") == "custom" and data.get("at") is None and "at" not in self.errors:
            self.add_error("at", "Give the date and time to snooze until (UTC).")
        return data


class BulkForm(forms.Form):
    action = forms.ChoiceField(
        choices=[("retry", "Retry"), ("assign", "Assign to me"), ("assign_to", "Assign to")]
    )
    ids = forms.TypedMultipleChoiceField(
        coerce=int,
        error_messages={
            "required": "Select at least one ticket.",
        },
    )
    user = forms.CharField(required=False, max_length=150)

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("action") == "assign_to":
            try:
                data["person"] = _person(data.get("user", ""))
            except forms.ValidationError as exc:
                self.add_error("user", exc)
        return data

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Any existing ticket may be named; the choices are checked against the database.
        raw = self.data.getlist("ids") if hasattr(self.data, "getlist") else []
        valid = [int(v) for v in raw if str(v).isdigit()]
        known = Ticket.objects.filter(pk__in=valid).values_list("pk", flat=True)
        ids = self.fields["ids"]  # a copy of the declared field, typed Field
        assert isinstance(ids, forms.ChoiceField)
        ids.choices = [(str(pk), str(pk)) for pk in known]
