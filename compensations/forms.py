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
        choices=[("open", "Open"), ("closed", "Closed"), ("all", "All")],
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
        self.fields["assignee"].choices = [
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


class AssignForm(forms.Form):
    to = forms.ChoiceField(choices=[("me", "me"), ("nobody", "nobody")])


class BulkForm(forms.Form):
    action = forms.ChoiceField(choices=[("retry", "Retry"), ("assign", "Assign to me")])
    ids = forms.TypedMultipleChoiceField(coerce=int, error_messages={
        "required": "Select at least one ticket.",
    })  # fmt: skip

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Any existing ticket may be named; the choices are checked against the database.
        raw = self.data.getlist("ids") if hasattr(self.data, "getlist") else []
        valid = [int(v) for v in raw if str(v).isdigit()]
        known = Ticket.objects.filter(pk__in=valid).values_list("pk", flat=True)
        self.fields["ids"].choices = [(str(pk), str(pk)) for pk in known]
